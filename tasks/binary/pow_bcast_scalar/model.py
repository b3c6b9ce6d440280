"""binary / pow_bcast_scalar: ONNX Pow (opset 20).

Power with a positive base and a single exponent broadcast to every element. The base is positive (a
real power of a negative base is NaN).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Power with a positive base and a single exponent broadcast to every element.
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [4, 256, 256], uniform in [0.1, 4)
            b: float32 tensor of shape [1], uniform in [-2, 2)
        Returns:
            y: float32 tensor of shape [4, 256, 256]
        """
        return torch.pow(a, b)


def get_inputs():
    a = torch.rand(4, 256, 256) * 3.9 + 0.1
    b = torch.rand(1,) * 4.0 - 2.0
    return [a, b]


def get_init_inputs():
    return []
