"""reduction / reduce_min_last_keep_4d: ONNX ReduceMin (opset 20).

Minimum over axes [-1] of a 4-D tensor, keepdims=1.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Minimum over axes [-1] of a 4-D tensor, keepdims=1.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [8, 64, 56, 56], normal with mean 0 and std 1
        Returns:
            y: float32 tensor of shape [8, 64, 56, 1]
        """
        return torch.amin(x, dim=-1, keepdim=True)


def get_inputs():
    x = torch.randn(8, 64, 56, 56) * 1.0
    return [x]


def get_init_inputs():
    return []
