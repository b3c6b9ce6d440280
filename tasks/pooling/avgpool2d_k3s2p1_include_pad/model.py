"""pooling / avgpool2d_k3s2p1_include_pad: ONNX AveragePool (opset 20).

2-D average pooling, kernel [3, 3], stride [2, 2], padding [1, 1], padding counted in the average.
"""

import torch
from torch import nn
from torch.nn import functional as F


class Model(nn.Module):
    """2-D average pooling, kernel [3, 3], stride [2, 2], padding [1, 1], padding counted in the average.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [8, 64, 56, 56], normal with mean 0 and std 1
        Returns:
            y: float32 tensor of shape [8, 64, 28, 28]
        """
        return F.avg_pool2d(x, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), ceil_mode=False, count_include_pad=True)


def get_inputs():
    x = torch.randn(8, 64, 56, 56) * 1.0
    return [x]


def get_init_inputs():
    return []
