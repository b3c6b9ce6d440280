"""binary / mul_bcast_row: ONNX Mul (opset 20).

Multiplication with a 1-D operand broadcast over the rows (numpy broadcasting).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Multiplication with a 1-D operand broadcast over the rows (numpy broadcasting).
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [1024, 1024], uniform in [-4, 4)
            b: float32 tensor of shape [1024], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [1024, 1024]
        """
        return a * b


def get_inputs():
    a = torch.rand(1024, 1024) * 8 - 4
    b = torch.rand(1024,) * 8 - 4
    return [a, b]


def get_init_inputs():
    return []
