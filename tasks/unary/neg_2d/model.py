"""unary / neg_2d: ONNX Neg (opset 20).

Element-wise Neg: y = torch.neg(x).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise Neg: y = torch.neg(x).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [1024, 1024], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [1024, 1024]
        """
        return torch.neg(x)


def get_inputs():
    x = torch.rand(1024, 1024) * 8 - 4
    return [x]


def get_init_inputs():
    return []
