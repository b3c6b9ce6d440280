"""binary / min_2d: ONNX Min (opset 20).

Element-wise minimum of two matrices.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise minimum of two matrices.
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [1024, 1024], uniform in [-4, 4)
            b: float32 tensor of shape [1024, 1024], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [1024, 1024]
        """
        return torch.minimum(a, b)


def get_inputs():
    a = torch.rand(1024, 1024) * 8 - 4
    b = torch.rand(1024, 1024) * 8 - 4
    return [a, b]


def get_init_inputs():
    return []
