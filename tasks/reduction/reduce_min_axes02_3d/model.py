"""reduction / reduce_min_axes02_3d: ONNX ReduceMin (opset 20).

Minimum over axes [0, 2] of a 3-D tensor, keepdims=0.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Minimum over axes [0, 2] of a 3-D tensor, keepdims=0.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [64, 128, 128], normal with mean 0 and std 1
        Returns:
            y: float32 tensor of shape [128]
        """
        return torch.amin(x, dim=(0, 2), keepdim=False)


def get_inputs():
    x = torch.randn(64, 128, 128) * 1.0
    return [x]


def get_init_inputs():
    return []
