"""pooling / avgpool1d_k4s2: ONNX AveragePool (opset 20).

1-D average pooling, kernel [4], stride [2], padding [0], padding excluded from the average.
"""

import torch
from torch import nn
from torch.nn import functional as F


class Model(nn.Module):
    """1-D average pooling, kernel [4], stride [2], padding [0], padding excluded from the average.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [8, 64, 1024], normal with mean 0 and std 1
        Returns:
            y: float32 tensor of shape [8, 64, 511]
        """
        return F.avg_pool1d(x, kernel_size=(4,), stride=(2,), padding=(0,), ceil_mode=False, count_include_pad=False)


def get_inputs():
    x = torch.randn(8, 64, 1024) * 1.0
    return [x]


def get_init_inputs():
    return []
