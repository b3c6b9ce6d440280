"""logic / xor_2d: ONNX Xor (opset 20).

Logical XOR of two bool matrices.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Logical XOR of two bool matrices.
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: bool tensor of shape [1024, 1024], random booleans (p=0.5)
            b: bool tensor of shape [1024, 1024], random booleans (p=0.5)
        Returns:
            y: bool tensor of shape [1024, 1024]
        """
        return torch.logical_xor(a, b)


def get_inputs():
    a = torch.randint(0, 2, (1024, 1024)).bool()
    b = torch.randint(0, 2, (1024, 1024)).bool()
    return [a, b]


def get_init_inputs():
    return []
