"""reduction / argmax_axis1_keep_4d: ONNX ArgMax (opset 20).

Index of the largest element along axis 1 (int64), keepdims=1.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Index of the largest element along axis 1 (int64), keepdims=1.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 64, 56, 56], normal with mean 0 and std 1
        Returns:
            y: int64 tensor of shape [4, 1, 56, 56]
        """
        return torch.argmax(x, dim=1, keepdim=True)


def get_inputs():
    x = torch.randn(4, 64, 56, 56) * 1.0
    return [x]


def get_init_inputs():
    return []
