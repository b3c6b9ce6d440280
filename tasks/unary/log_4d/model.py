"""unary / log_4d: ONNX Log (opset 20).

Element-wise Log: y = torch.log(x). Inputs are positive (Log's domain).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise Log: y = torch.log(x).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 32, 64, 64], uniform in [0.01, 10)
        Returns:
            y: float32 tensor of shape [4, 32, 64, 64]
        """
        return torch.log(x)


def get_inputs():
    x = torch.rand(4, 32, 64, 64) * 9.99 + 0.01
    return [x]


def get_init_inputs():
    return []
