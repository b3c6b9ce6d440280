"""reduction / argmax_axis2_keep_3d: ONNX ArgMax (opset 20).

Index of the largest element along axis 2 (int64), keepdims=1.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Index of the largest element along axis 2 (int64), keepdims=1.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [64, 128, 256], normal with mean 0 and std 1
        Returns:
            y: int64 tensor of shape [64, 128, 1]
        """
        return torch.argmax(x, dim=2, keepdim=True)


def get_inputs():
    x = torch.randn(64, 128, 256) * 1.0
    return [x]


def get_init_inputs():
    return []
