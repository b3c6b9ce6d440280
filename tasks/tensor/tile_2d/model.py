"""tensor / tile_2d: ONNX Tile (opset 20).

Repeat a [128, 256] matrix 4 times along both axes.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Repeat a [128, 256] matrix 4 times along both axes.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [128, 256], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [512, 1024]
        """
        return x.repeat(4, 4)


def get_inputs():
    x = torch.rand(128, 256) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
