"""reduction / reduce_max_axis1_3d: ONNX ReduceMax (opset 20).

Maximum over axes [1] of a 3-D tensor, keepdims=0.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Maximum over axes [1] of a 3-D tensor, keepdims=0.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [32, 512, 64], normal with mean 0 and std 1
        Returns:
            y: float32 tensor of shape [32, 64]
        """
        return torch.amax(x, dim=1, keepdim=False)


def get_inputs():
    x = torch.randn(32, 512, 64) * 1.0
    return [x]


def get_init_inputs():
    return []
