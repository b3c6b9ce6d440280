"""logic / equal_int32_3d: ONNX Equal (opset 20).

Element-wise equality of two int32 tensors (bool output). Integers in [0, 3] so that about a quarter
of the elements are equal.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise equality of two int32 tensors (bool output).
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: int32 tensor of shape [32, 256, 128], random integers in [0, 3]
            b: int32 tensor of shape [32, 256, 128], random integers in [0, 3]
        Returns:
            y: bool tensor of shape [32, 256, 128]
        """
        return torch.eq(a, b)


def get_inputs():
    a = torch.randint(0, 4, (32, 256, 128), dtype=torch.int32)
    b = torch.randint(0, 4, (32, 256, 128), dtype=torch.int32)
    return [a, b]


def get_init_inputs():
    return []
