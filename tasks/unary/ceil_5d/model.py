"""unary / ceil_5d: ONNX Ceil (opset 20).

Element-wise Ceil: y = torch.ceil(x).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise Ceil: y = torch.ceil(x).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 8, 16, 32, 64], uniform in [-10, 10)
        Returns:
            y: float32 tensor of shape [4, 8, 16, 32, 64]
        """
        return torch.ceil(x)


def get_inputs():
    x = torch.rand(4, 8, 16, 32, 64) * 20 - 10
    return [x]


def get_init_inputs():
    return []
