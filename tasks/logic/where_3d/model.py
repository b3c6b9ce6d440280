"""logic / where_3d: ONNX Where (opset 20).

Select element-wise: y = x if cond else z (all three of the same shape).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Select element-wise: y = x if cond else z (all three of the same shape).
    """

    def __init__(self):
        super().__init__()

    def forward(self, cond: torch.Tensor, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """
        Args:
            cond: bool tensor of shape [16, 256, 128], random booleans (p=0.5)
            x: float32 tensor of shape [16, 256, 128], uniform in [-1, 1)
            z: float32 tensor of shape [16, 256, 128], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [16, 256, 128]
        """
        return torch.where(cond, x, z)


def get_inputs():
    cond = torch.randint(0, 2, (16, 256, 128)).bool()
    x = torch.rand(16, 256, 128) * 2.0 - 1.0
    z = torch.rand(16, 256, 128) * 8 - 4
    return [cond, x, z]


def get_init_inputs():
    return []
