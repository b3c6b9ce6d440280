"""unary / reciprocal_4d: ONNX Reciprocal (opset 20).

Element-wise Reciprocal: y = torch.reciprocal(x).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise Reciprocal: y = torch.reciprocal(x).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 64, 64, 64], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [4, 64, 64, 64]
        """
        return torch.reciprocal(x)


def get_inputs():
    x = torch.rand(4, 64, 64, 64) * 8.0 - 4.0
    return [x]


def get_init_inputs():
    return []
