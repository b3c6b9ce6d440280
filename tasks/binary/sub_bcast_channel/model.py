"""binary / sub_bcast_channel: ONNX Sub (opset 20).

Subtraction with a per-channel operand broadcast over batch and spatial dims.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Subtraction with a per-channel operand broadcast over batch and spatial dims.
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [4, 64, 64, 64], uniform in [-4, 4)
            b: float32 tensor of shape [1, 64, 1, 1], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [4, 64, 64, 64]
        """
        return a - b


def get_inputs():
    a = torch.rand(4, 64, 64, 64) * 8 - 4
    b = torch.rand(1, 64, 1, 1) * 8 - 4
    return [a, b]


def get_init_inputs():
    return []
