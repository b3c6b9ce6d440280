"""trigonometry / sin_4d: ONNX Sin (opset 20).

Element-wise Sin: y = torch.sin(x).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise Sin: y = torch.sin(x).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 16, 64, 64], uniform in [-6.28319, 6.28319)
        Returns:
            y: float32 tensor of shape [4, 16, 64, 64]
        """
        return torch.sin(x)


def get_inputs():
    x = torch.rand(4, 16, 64, 64) * 12.566371 - 6.2831855
    return [x]


def get_init_inputs():
    return []
