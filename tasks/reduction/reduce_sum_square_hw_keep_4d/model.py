"""reduction / reduce_sum_square_hw_keep_4d: ONNX ReduceSumSquare (opset 20).

Sum of squares over axes [2, 3] of a 4-D tensor, keepdims=1.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Sum of squares over axes [2, 3] of a 4-D tensor, keepdims=1.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 64, 56, 56], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [4, 64, 1, 1]
        """
        return torch.sum(x * x, dim=(2, 3), keepdim=True)


def get_inputs():
    x = torch.rand(4, 64, 56, 56) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
