"""unary / exp_3d: ONNX Exp (opset 20).

Element-wise Exp: y = torch.exp(x).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise Exp: y = torch.exp(x).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [16, 256, 256], uniform in [-5, 5)
        Returns:
            y: float32 tensor of shape [16, 256, 256]
        """
        return torch.exp(x)


def get_inputs():
    x = torch.rand(16, 256, 256) * 10 - 5
    return [x]


def get_init_inputs():
    return []
