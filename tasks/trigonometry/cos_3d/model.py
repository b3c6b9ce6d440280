"""trigonometry / cos_3d: ONNX Cos (opset 20).

Element-wise Cos: y = torch.cos(x).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise Cos: y = torch.cos(x).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [16, 128, 128], uniform in [-6.28319, 6.28319)
        Returns:
            y: float32 tensor of shape [16, 128, 128]
        """
        return torch.cos(x)


def get_inputs():
    x = torch.rand(16, 128, 128) * 12.566371 - 6.2831855
    return [x]


def get_init_inputs():
    return []
