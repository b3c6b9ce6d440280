"""logic / or_bcast: ONNX Or (opset 20).

Logical OR with a broadcast bool row.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Logical OR with a broadcast bool row.
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: bool tensor of shape [32, 128, 128], random booleans (p=0.5)
            b: bool tensor of shape [128], random booleans (p=0.5)
        Returns:
            y: bool tensor of shape [32, 128, 128]
        """
        return torch.logical_or(a, b)


def get_inputs():
    a = torch.randint(0, 2, (32, 128, 128)).bool()
    b = torch.randint(0, 2, (128,)).bool()
    return [a, b]


def get_init_inputs():
    return []
