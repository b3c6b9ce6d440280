"""tensor / split_3way_axis1: ONNX Split (opset 20).

Split an NCHW tensor along channels into parts of 16, 32 and 48 channels.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Split an NCHW tensor along channels into parts of 16, 32 and 48 channels.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """
        Args:
            x: float32 tensor of shape [8, 96, 56, 56], uniform in [-1, 1)
        Returns:
            y0: float32 tensor of shape [8, 16, 56, 56]
            y1: float32 tensor of shape [8, 32, 56, 56]
            y2: float32 tensor of shape [8, 48, 56, 56]
        """
        return tuple(torch.split(x, [16, 32, 48], dim=1))


def get_inputs():
    x = torch.rand(8, 96, 56, 56) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
