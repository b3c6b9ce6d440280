"""trigonometry / sinh_2d: ONNX Sinh (opset 20).

Element-wise Sinh: y = torch.sinh(x).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise Sinh: y = torch.sinh(x).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [512, 512], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [512, 512]
        """
        return torch.sinh(x)


def get_inputs():
    x = torch.rand(512, 512) * 8 - 4
    return [x]


def get_init_inputs():
    return []
