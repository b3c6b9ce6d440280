"""tensor / trilu_upper_k1: ONNX Trilu (opset 20).

Upper triangle above the main diagonal (k=1) of each matrix of a batch.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Upper triangle above the main diagonal (k=1) of each matrix of a batch.

    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):
        k: int64 [], diagonal offset (scalar)
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [16, 256, 256], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [16, 256, 256]
        """
        return torch.triu(x, diagonal=1)


def get_inputs():
    x = torch.rand(16, 256, 256) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
