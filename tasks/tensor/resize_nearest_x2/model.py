"""tensor / resize_nearest_x2: ONNX Resize (opset 20).

Nearest-neighbour upsampling of H and W by 2 (asymmetric coordinates, floor rounding).
"""

import torch
from torch import nn
from torch.nn import functional as F


class Model(nn.Module):
    """Nearest-neighbour upsampling of H and W by 2 (asymmetric coordinates, floor rounding).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [1, 64, 56, 56], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [1, 64, 112, 112]
        """
        return F.interpolate(x, scale_factor=2.0, mode="nearest")


def get_inputs():
    x = torch.rand(1, 64, 56, 56) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
