"""unary / floor_3d: ONNX Floor (opset 20).

Element-wise Floor: y = torch.floor(x).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise Floor: y = torch.floor(x).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [32, 256, 128], uniform in [-10, 10)
        Returns:
            y: float32 tensor of shape [32, 256, 128]
        """
        return torch.floor(x)


def get_inputs():
    x = torch.rand(32, 256, 128) * 20 - 10
    return [x]


def get_init_inputs():
    return []
