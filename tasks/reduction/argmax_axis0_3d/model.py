"""reduction / argmax_axis0_3d: ONNX ArgMax (opset 20).

Index of the largest element along axis 0 (int64), keepdims=0.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Index of the largest element along axis 0 (int64), keepdims=0.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [32, 128, 128], normal with mean 0 and std 1
        Returns:
            y: int64 tensor of shape [128, 128]
        """
        return torch.argmax(x, dim=0, keepdim=False)


def get_inputs():
    x = torch.randn(32, 128, 128) * 1.0
    return [x]


def get_init_inputs():
    return []
