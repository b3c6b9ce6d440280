"""unary / abs_1d: ONNX Abs (opset 20).

Element-wise Abs: y = torch.abs(x).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise Abs: y = torch.abs(x).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [1048576], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [1048576]
        """
        return torch.abs(x)


def get_inputs():
    x = torch.rand(1048576,) * 8 - 4
    return [x]


def get_init_inputs():
    return []
