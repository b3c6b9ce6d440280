"""matrix / matmul_3d_by_2d: ONNX MatMul (opset 20).

A batch of matrices times one shared matrix (the 2-D operand broadcasts over the batch).
"""

import torch
from torch import nn


class Model(nn.Module):
    """A batch of matrices times one shared matrix (the 2-D operand broadcasts over the batch).
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [8, 128, 256], uniform in [-1, 1)
            b: float32 tensor of shape [256, 128], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [8, 128, 128]
        """
        return torch.matmul(a, b)


def get_inputs():
    a = torch.rand(8, 128, 256) * 2.0 - 1.0
    b = torch.rand(256, 128) * 2.0 - 1.0
    return [a, b]


def get_init_inputs():
    return []
