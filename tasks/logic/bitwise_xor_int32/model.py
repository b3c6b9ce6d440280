"""logic / bitwise_xor_int32: ONNX BitwiseXor (opset 20).

Bitwise XOR of two int32 tensors (negative values included, two's complement).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Bitwise XOR of two int32 tensors (negative values included, two's complement).
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: int32 tensor of shape [32, 256, 128], random integers in [-100000, 100000]
            b: int32 tensor of shape [32, 256, 128], random integers in [-100000, 100000]
        Returns:
            y: int32 tensor of shape [32, 256, 128]
        """
        return torch.bitwise_xor(a, b)


def get_inputs():
    a = torch.randint(-100000, 100001, (32, 256, 128), dtype=torch.int32)
    b = torch.randint(-100000, 100001, (32, 256, 128), dtype=torch.int32)
    return [a, b]


def get_init_inputs():
    return []
