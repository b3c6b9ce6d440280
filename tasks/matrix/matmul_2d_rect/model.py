"""matrix / matmul_2d_rect: ONNX MatMul (opset 20).

Matrix product [512, 256] x [256, 384].
"""

import torch
from torch import nn


class Model(nn.Module):
    """Matrix product [512, 256] x [256, 384].
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [512, 256], uniform in [-1, 1)
            b: float32 tensor of shape [256, 384], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [512, 384]
        """
        return torch.matmul(a, b)


def get_inputs():
    a = torch.rand(512, 256) * 2.0 - 1.0
    b = torch.rand(256, 384) * 2.0 - 1.0
    return [a, b]


def get_init_inputs():
    return []
