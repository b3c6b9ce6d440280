"""reduction / reduce_sum_axes13_5d: ONNX ReduceSum (opset 20).

Sum over axes [1, 3] of a 5-D tensor, keepdims=0.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Sum over axes [1, 3] of a 5-D tensor, keepdims=0.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [2, 16, 16, 32, 32], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [2, 16, 32]
        """
        return torch.sum(x, dim=(1, 3), keepdim=False)


def get_inputs():
    x = torch.rand(2, 16, 16, 32, 32) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
