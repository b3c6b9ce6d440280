"""logic / where_bcast_4d: ONNX Where (opset 20).

Select with broadcasting: a [1, 1, H, W] mask chooses between an NCHW tensor and a per-channel [1,
C, 1, 1] fill value.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Select with broadcasting: a [1, 1, H, W] mask chooses between an NCHW tensor and a per-channel [1,
    C, 1, 1] fill value.
    """

    def __init__(self):
        super().__init__()

    def forward(self, cond: torch.Tensor, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """
        Args:
            cond: bool tensor of shape [1, 1, 64, 64], random booleans (p=0.5)
            x: float32 tensor of shape [8, 32, 64, 64], uniform in [-1, 1)
            z: float32 tensor of shape [1, 32, 1, 1], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [8, 32, 64, 64]
        """
        return torch.where(cond, x, z)


def get_inputs():
    cond = torch.randint(0, 2, (1, 1, 64, 64)).bool()
    x = torch.rand(8, 32, 64, 64) * 2.0 - 1.0
    z = torch.rand(1, 32, 1, 1) * 8 - 4
    return [cond, x, z]


def get_init_inputs():
    return []
