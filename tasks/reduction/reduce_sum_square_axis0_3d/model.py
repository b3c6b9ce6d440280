"""reduction / reduce_sum_square_axis0_3d: ONNX ReduceSumSquare (opset 20).

Sum of squares over axes [0] of a 3-D tensor, keepdims=0.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Sum of squares over axes [0] of a 3-D tensor, keepdims=0.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [64, 128, 128], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [128, 128]
        """
        return torch.sum(x * x, dim=0, keepdim=False)


def get_inputs():
    x = torch.rand(64, 128, 128) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
