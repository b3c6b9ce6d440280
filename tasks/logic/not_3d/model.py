"""logic / not_3d: ONNX Not (opset 20).

Logical NOT of a bool tensor.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Logical NOT of a bool tensor.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: bool tensor of shape [32, 256, 128], random booleans (p=0.5)
        Returns:
            y: bool tensor of shape [32, 256, 128]
        """
        return torch.logical_not(x)


def get_inputs():
    x = torch.randint(0, 2, (32, 256, 128)).bool()
    return [x]


def get_init_inputs():
    return []
