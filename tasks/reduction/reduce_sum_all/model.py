"""reduction / reduce_sum_all: ONNX ReduceSum (opset 20).

Sum over all axes (no axes input) of a 2-D tensor, keepdims=0.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Sum over all axes (no axes input) of a 2-D tensor, keepdims=0.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [256, 4096], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape []
        """
        return torch.sum(x, dim=(0, 1), keepdim=False)


def get_inputs():
    x = torch.rand(256, 4096) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
