"""reduction / reduce_l2_axes12_3d: ONNX ReduceL2 (opset 20).

L2 norm over axes [1, 2] of a 3-D tensor, keepdims=0.
"""

import torch
from torch import nn


class Model(nn.Module):
    """L2 norm over axes [1, 2] of a 3-D tensor, keepdims=0.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [64, 128, 128], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [64]
        """
        return torch.linalg.vector_norm(x, ord=2, dim=(1, 2), keepdim=False)


def get_inputs():
    x = torch.rand(64, 128, 128) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
