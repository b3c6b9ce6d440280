"""reduction / reduce_max_last_keep_2d: ONNX ReduceMax (opset 20).

Maximum over axes [-1] of a 2-D tensor, keepdims=1.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Maximum over axes [-1] of a 2-D tensor, keepdims=1.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [1024, 1024], normal with mean 0 and std 1
        Returns:
            y: float32 tensor of shape [1024, 1]
        """
        return torch.amax(x, dim=-1, keepdim=True)


def get_inputs():
    x = torch.randn(1024, 1024) * 1.0
    return [x]


def get_init_inputs():
    return []
