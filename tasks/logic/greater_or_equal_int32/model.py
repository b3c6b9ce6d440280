"""logic / greater_or_equal_int32: ONNX GreaterOrEqual (opset 20).

Element-wise a >= b on int32 tensors with many ties.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise a >= b on int32 tensors with many ties.
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: int32 tensor of shape [1024, 1024], random integers in [-3, 3]
            b: int32 tensor of shape [1024, 1024], random integers in [-3, 3]
        Returns:
            y: bool tensor of shape [1024, 1024]
        """
        return torch.ge(a, b)


def get_inputs():
    a = torch.randint(-3, 4, (1024, 1024), dtype=torch.int32)
    b = torch.randint(-3, 4, (1024, 1024), dtype=torch.int32)
    return [a, b]


def get_init_inputs():
    return []
