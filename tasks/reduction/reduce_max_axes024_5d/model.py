"""reduction / reduce_max_axes024_5d: ONNX ReduceMax (opset 20).

Maximum over axes [0, 2, 4] of a 5-D tensor, keepdims=0.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Maximum over axes [0, 2, 4] of a 5-D tensor, keepdims=0.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 16, 16, 32, 32], normal with mean 0 and std 1
        Returns:
            y: float32 tensor of shape [16, 32]
        """
        return torch.amax(x, dim=(0, 2, 4), keepdim=False)


def get_inputs():
    x = torch.randn(4, 16, 16, 32, 32) * 1.0
    return [x]


def get_init_inputs():
    return []
