"""unary / sqrt_4d: ONNX Sqrt (opset 20).

Element-wise Sqrt: y = torch.sqrt(x). Inputs are positive (Sqrt's domain).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise Sqrt: y = torch.sqrt(x).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 32, 64, 64], uniform in [0, 100)
        Returns:
            y: float32 tensor of shape [4, 32, 64, 64]
        """
        return torch.sqrt(x)


def get_inputs():
    x = torch.rand(4, 32, 64, 64) * 100.0
    return [x]


def get_init_inputs():
    return []
