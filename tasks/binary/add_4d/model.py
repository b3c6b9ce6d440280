"""binary / add_4d: ONNX Add (opset 20).

Element-wise addition of two tensors of the same shape.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise addition of two tensors of the same shape.
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [4, 64, 64, 64], uniform in [-4, 4)
            b: float32 tensor of shape [4, 64, 64, 64], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [4, 64, 64, 64]
        """
        return a + b


def get_inputs():
    a = torch.rand(4, 64, 64, 64) * 8 - 4
    b = torch.rand(4, 64, 64, 64) * 8 - 4
    return [a, b]


def get_init_inputs():
    return []
