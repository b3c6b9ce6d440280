"""trigonometry / atan_3d: ONNX Atan (opset 20).

Element-wise Atan: y = torch.atan(x).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise Atan: y = torch.atan(x).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [16, 128, 128], uniform in [-10, 10)
        Returns:
            y: float32 tensor of shape [16, 128, 128]
        """
        return torch.atan(x)


def get_inputs():
    x = torch.rand(16, 128, 128) * 20 - 10
    return [x]


def get_init_inputs():
    return []
