"""binary / div_3d: ONNX Div (opset 20).

Element-wise division; the divisor is kept away from zero. The divisor is positive in [0.5, 4) to
keep the quotient well conditioned.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise division; the divisor is kept away from zero.
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [32, 256, 128], uniform in [-4, 4)
            b: float32 tensor of shape [32, 256, 128], uniform in [0.5, 4)
        Returns:
            y: float32 tensor of shape [32, 256, 128]
        """
        return a / b


def get_inputs():
    a = torch.rand(32, 256, 128) * 8 - 4
    b = torch.rand(32, 256, 128) * 3.5 + 0.5
    return [a, b]


def get_init_inputs():
    return []
