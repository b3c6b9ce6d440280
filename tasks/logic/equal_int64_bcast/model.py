"""logic / equal_int64_bcast: ONNX Equal (opset 20).

Equality of an int64 tensor with a broadcast int64 row.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Equality of an int64 tensor with a broadcast int64 row.
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: int64 tensor of shape [64, 128, 128], random integers in [-2, 2]
            b: int64 tensor of shape [128], random integers in [-2, 2]
        Returns:
            y: bool tensor of shape [64, 128, 128]
        """
        return torch.eq(a, b)


def get_inputs():
    a = torch.randint(-2, 3, (64, 128, 128), dtype=torch.int64)
    b = torch.randint(-2, 3, (128,), dtype=torch.int64)
    return [a, b]


def get_init_inputs():
    return []
