"""reduction / reduce_sum_axis1_keep_3d: ONNX ReduceSum (opset 20).

Sum over axes [1] of a 3-D tensor, keepdims=1.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Sum over axes [1] of a 3-D tensor, keepdims=1.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [32, 512, 64], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [32, 1, 64]
        """
        return torch.sum(x, dim=1, keepdim=True)


def get_inputs():
    x = torch.rand(32, 512, 64) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
