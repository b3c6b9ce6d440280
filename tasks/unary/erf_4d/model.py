"""unary / erf_4d: ONNX Erf (opset 20).

Element-wise Erf: y = torch.erf(x).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise Erf: y = torch.erf(x).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 64, 32, 32], uniform in [-3, 3)
        Returns:
            y: float32 tensor of shape [4, 64, 32, 32]
        """
        return torch.erf(x)


def get_inputs():
    x = torch.rand(4, 64, 32, 32) * 6 - 3
    return [x]


def get_init_inputs():
    return []
