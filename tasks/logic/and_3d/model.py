"""logic / and_3d: ONNX And (opset 20).

Logical AND of two bool tensors.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Logical AND of two bool tensors.
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: bool tensor of shape [32, 256, 128], random booleans (p=0.5)
            b: bool tensor of shape [32, 256, 128], random booleans (p=0.5)
        Returns:
            y: bool tensor of shape [32, 256, 128]
        """
        return torch.logical_and(a, b)


def get_inputs():
    a = torch.randint(0, 2, (32, 256, 128)).bool()
    b = torch.randint(0, 2, (32, 256, 128)).bool()
    return [a, b]


def get_init_inputs():
    return []
