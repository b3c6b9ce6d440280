"""reduction / argmin_axis0_keep_3d: ONNX ArgMin (opset 20).

Index of the smallest element along axis 0 (int64), keepdims=1.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Index of the smallest element along axis 0 (int64), keepdims=1.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [32, 128, 128], normal with mean 0 and std 1
        Returns:
            y: int64 tensor of shape [1, 128, 128]
        """
        return torch.argmin(x, dim=0, keepdim=True)


def get_inputs():
    x = torch.randn(32, 128, 128) * 1.0
    return [x]


def get_init_inputs():
    return []
