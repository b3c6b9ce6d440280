"""tensor / tile_4d: ONNX Tile (opset 20).

Tile an NCHW tensor with repeats [2, 1, 2, 3].
"""

import torch
from torch import nn


class Model(nn.Module):
    """Tile an NCHW tensor with repeats [2, 1, 2, 3].
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [2, 32, 32, 32], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [4, 32, 64, 96]
        """
        return x.repeat(2, 1, 2, 3)


def get_inputs():
    x = torch.rand(2, 32, 32, 32) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
