"""reduction / argmax_last_2d: ONNX ArgMax (opset 20).

Index of the largest element along axis -1 (int64), keepdims=0.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Index of the largest element along axis -1 (int64), keepdims=0.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [1024, 1000], normal with mean 0 and std 1
        Returns:
            y: int64 tensor of shape [1024]
        """
        return torch.argmax(x, dim=-1, keepdim=False)


def get_inputs():
    x = torch.randn(1024, 1000) * 1.0
    return [x]


def get_init_inputs():
    return []
