"""reduction / reduce_max_hw_4d: ONNX ReduceMax (opset 20).

Maximum over axes [2, 3] of a 4-D tensor, keepdims=1.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Maximum over axes [2, 3] of a 4-D tensor, keepdims=1.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [8, 64, 56, 56], normal with mean 0 and std 1
        Returns:
            y: float32 tensor of shape [8, 64, 1, 1]
        """
        return torch.amax(x, dim=(2, 3), keepdim=True)


def get_inputs():
    x = torch.randn(8, 64, 56, 56) * 1.0
    return [x]


def get_init_inputs():
    return []
