"""reduction / reduce_min_axis0_2d: ONNX ReduceMin (opset 20).

Minimum over axes [0] of a 2-D tensor, keepdims=0.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Minimum over axes [0] of a 2-D tensor, keepdims=0.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4096, 256], normal with mean 0 and std 1
        Returns:
            y: float32 tensor of shape [256]
        """
        return torch.amin(x, dim=0, keepdim=False)


def get_inputs():
    x = torch.randn(4096, 256) * 1.0
    return [x]


def get_init_inputs():
    return []
