"""matrix / matmul_batched_3d: ONNX MatMul (opset 20).

Batched matrix product over a batch of 8.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Batched matrix product over a batch of 8.
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [8, 128, 256], uniform in [-1, 1)
            b: float32 tensor of shape [8, 256, 128], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [8, 128, 128]
        """
        return torch.matmul(a, b)


def get_inputs():
    a = torch.rand(8, 128, 256) * 2.0 - 1.0
    b = torch.rand(8, 256, 128) * 2.0 - 1.0
    return [a, b]


def get_init_inputs():
    return []
