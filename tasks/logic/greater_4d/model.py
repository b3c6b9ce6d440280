"""logic / greater_4d: ONNX Greater (opset 20).

Element-wise a > b (bool output).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise a > b (bool output).
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [8, 32, 64, 64], uniform in [-4, 4)
            b: float32 tensor of shape [8, 32, 64, 64], uniform in [-4, 4)
        Returns:
            y: bool tensor of shape [8, 32, 64, 64]
        """
        return torch.gt(a, b)


def get_inputs():
    a = torch.rand(8, 32, 64, 64) * 8 - 4
    b = torch.rand(8, 32, 64, 64) * 8 - 4
    return [a, b]


def get_init_inputs():
    return []
