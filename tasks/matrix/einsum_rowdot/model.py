"""matrix / einsum_rowdot: ONNX Einsum (opset 20).

Row-wise dot products (einsum bi,bi->b).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Row-wise dot products (einsum bi,bi->b).
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [2048, 512], uniform in [-1, 1)
            b: float32 tensor of shape [2048, 512], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [2048]
        """
        return torch.einsum('bi,bi->b', a, b)


def get_inputs():
    a = torch.rand(2048, 512) * 2.0 - 1.0
    b = torch.rand(2048, 512) * 2.0 - 1.0
    return [a, b]


def get_init_inputs():
    return []
