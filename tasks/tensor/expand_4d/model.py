"""tensor / expand_4d: ONNX Expand (opset 20).

Broadcast a [1, 64, 1, 64] tensor to [8, 64, 32, 64] (ONNX Expand).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Broadcast a [1, 64, 1, 64] tensor to [8, 64, 32, 64] (ONNX Expand).

    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):
        shape: int64 [4], target shape
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [1, 64, 1, 64], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [8, 64, 32, 64]
        """
        return x.expand(8, 64, 32, 64)


def get_inputs():
    x = torch.rand(1, 64, 1, 64) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
