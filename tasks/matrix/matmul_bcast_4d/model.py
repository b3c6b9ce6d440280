"""matrix / matmul_bcast_4d: ONNX MatMul (opset 20).

Batched matrix product with numpy broadcasting of the batch dims ([2, 4] with [4]).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Batched matrix product with numpy broadcasting of the batch dims ([2, 4] with [4]).
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [2, 4, 128, 64], uniform in [-1, 1)
            b: float32 tensor of shape [4, 64, 128], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [2, 4, 128, 128]
        """
        return torch.matmul(a, b)


def get_inputs():
    a = torch.rand(2, 4, 128, 64) * 2.0 - 1.0
    b = torch.rand(4, 64, 128) * 2.0 - 1.0
    return [a, b]


def get_init_inputs():
    return []
