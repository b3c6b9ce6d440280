"""reduction / reduce_prod_axis0_keep_3d: ONNX ReduceProd (opset 20).

Product over axes [0] of a 3-D tensor, keepdims=1.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Product over axes [0] of a 3-D tensor, keepdims=1.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [8, 256, 512], normal with mean 1 and std 0.25
        Returns:
            y: float32 tensor of shape [1, 256, 512]
        """
        return torch.prod(x, dim=0, keepdim=True)


def get_inputs():
    x = torch.randn(8, 256, 512) * 0.25 + 1.0
    return [x]


def get_init_inputs():
    return []
