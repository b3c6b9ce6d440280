"""trigonometry / tanh_5d: ONNX Tanh (opset 20).

Element-wise Tanh: y = torch.tanh(x).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise Tanh: y = torch.tanh(x).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [2, 8, 16, 32, 32], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [2, 8, 16, 32, 32]
        """
        return torch.tanh(x)


def get_inputs():
    x = torch.rand(2, 8, 16, 32, 32) * 8 - 4
    return [x]


def get_init_inputs():
    return []
