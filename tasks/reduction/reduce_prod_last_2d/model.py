"""reduction / reduce_prod_last_2d: ONNX ReduceProd (opset 20).

Product over axes [-1] of a 2-D tensor, keepdims=0.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Product over axes [-1] of a 2-D tensor, keepdims=0.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [32768, 32], normal with mean 1 and std 0.25
        Returns:
            y: float32 tensor of shape [32768]
        """
        return torch.prod(x, dim=-1, keepdim=False)


def get_inputs():
    x = torch.randn(32768, 32) * 0.25 + 1.0
    return [x]


def get_init_inputs():
    return []
