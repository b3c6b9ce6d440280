"""trigonometry / atanh_4d: ONNX Atanh (opset 20).

Element-wise Atanh: y = torch.atanh(x). Inputs are inside Atanh's domain (-1, 1).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise Atanh: y = torch.atanh(x).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 64, 32, 32], uniform in [-0.95, 0.95)
        Returns:
            y: float32 tensor of shape [4, 64, 32, 32]
        """
        return torch.atanh(x)


def get_inputs():
    x = torch.rand(4, 64, 32, 32) * 1.9 - 0.95
    return [x]


def get_init_inputs():
    return []
