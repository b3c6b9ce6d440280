"""matrix / matmul_matvec: ONNX MatMul (opset 20).

Matrix-vector product (1-D right operand).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Matrix-vector product (1-D right operand).
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [1024, 1024], uniform in [-1, 1)
            b: float32 tensor of shape [1024], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [1024]
        """
        return torch.matmul(a, b)


def get_inputs():
    a = torch.rand(1024, 1024) * 2.0 - 1.0
    b = torch.rand(1024,) * 2.0 - 1.0
    return [a, b]


def get_init_inputs():
    return []
