"""reduction / reduce_sum_last_2d: ONNX ReduceSum (opset 20).

Sum over axes [-1] of a 2-D tensor, keepdims=0.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Sum over axes [-1] of a 2-D tensor, keepdims=0.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [1024, 1024], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [1024]
        """
        return torch.sum(x, dim=-1, keepdim=False)


def get_inputs():
    x = torch.rand(1024, 1024) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
