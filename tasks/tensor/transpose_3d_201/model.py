"""tensor / transpose_3d_201: ONNX Transpose (opset 20).

Permute a 3-D tensor with perm [2, 0, 1].
"""

import torch
from torch import nn


class Model(nn.Module):
    """Permute a 3-D tensor with perm [2, 0, 1].
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [512, 64, 32], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [32, 512, 64]
        """
        return x.permute(2, 0, 1)


def get_inputs():
    x = torch.rand(512, 64, 32) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
