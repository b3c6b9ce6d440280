"""pooling / maxpool1d_k3s2_ceil: ONNX MaxPool (opset 20).

1-D max pooling, kernel [3], stride [2], padding [0], ceil_mode.
"""

import torch
from torch import nn
from torch.nn import functional as F


class Model(nn.Module):
    """1-D max pooling, kernel [3], stride [2], padding [0], ceil_mode.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [16, 64, 1022], normal with mean 0 and std 1
        Returns:
            y: float32 tensor of shape [16, 64, 511]
        """
        return F.max_pool1d(x, kernel_size=(3,), stride=(2,), padding=(0,), ceil_mode=True)


def get_inputs():
    x = torch.randn(16, 64, 1022) * 1.0
    return [x]


def get_init_inputs():
    return []
