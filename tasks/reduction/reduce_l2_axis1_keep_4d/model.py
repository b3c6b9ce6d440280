"""reduction / reduce_l2_axis1_keep_4d: ONNX ReduceL2 (opset 20).

L2 norm over axes [1] of a 4-D tensor, keepdims=1.
"""

import torch
from torch import nn


class Model(nn.Module):
    """L2 norm over axes [1] of a 4-D tensor, keepdims=1.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 64, 56, 56], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [4, 1, 56, 56]
        """
        return torch.linalg.vector_norm(x, ord=2, dim=1, keepdim=True)


def get_inputs():
    x = torch.rand(4, 64, 56, 56) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
