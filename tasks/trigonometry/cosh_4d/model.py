"""trigonometry / cosh_4d: ONNX Cosh (opset 20).

Element-wise Cosh: y = torch.cosh(x).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise Cosh: y = torch.cosh(x).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 16, 64, 64], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [4, 16, 64, 64]
        """
        return torch.cosh(x)


def get_inputs():
    x = torch.rand(4, 16, 64, 64) * 8 - 4
    return [x]


def get_init_inputs():
    return []
