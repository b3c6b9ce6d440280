"""matrix / einsum_abt: ONNX Einsum (opset 20).

Matrix product with a transposed operand (einsum ik,jk->ij).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Matrix product with a transposed operand (einsum ik,jk->ij).
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [256, 256], uniform in [-1, 1)
            b: float32 tensor of shape [384, 256], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [256, 384]
        """
        return torch.einsum('ik,jk->ij', a, b)


def get_inputs():
    a = torch.rand(256, 256) * 2.0 - 1.0
    b = torch.rand(384, 256) * 2.0 - 1.0
    return [a, b]


def get_init_inputs():
    return []
