"""pooling / maxpool2d_k3s2p1: ONNX MaxPool (opset 20).

2-D max pooling, kernel [3, 3], stride [2, 2], padding [1, 1].
"""

import torch
from torch import nn
from torch.nn import functional as F


class Model(nn.Module):
    """2-D max pooling, kernel [3, 3], stride [2, 2], padding [1, 1].
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [2, 64, 112, 112], normal with mean 0 and std 1
        Returns:
            y: float32 tensor of shape [2, 64, 56, 56]
        """
        return F.max_pool2d(x, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), ceil_mode=False)


def get_inputs():
    x = torch.randn(2, 64, 112, 112) * 1.0
    return [x]


def get_init_inputs():
    return []
