"""pooling / avgpool2d_k3s1p1_exclude_pad: ONNX AveragePool (opset 20).

2-D average pooling, kernel [3, 3], stride [1, 1], padding [1, 1], padding excluded from the
average.
"""

import torch
from torch import nn
from torch.nn import functional as F


class Model(nn.Module):
    """2-D average pooling, kernel [3, 3], stride [1, 1], padding [1, 1], padding excluded from the
    average.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 64, 56, 56], normal with mean 0 and std 1
        Returns:
            y: float32 tensor of shape [4, 64, 56, 56]
        """
        return F.avg_pool2d(x, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), ceil_mode=False, count_include_pad=False)


def get_inputs():
    x = torch.randn(4, 64, 56, 56) * 1.0
    return [x]


def get_init_inputs():
    return []
