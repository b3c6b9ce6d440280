"""matrix / gemm_alpha_beta: ONNX Gemm (opset 20).

y = 0.5 * (a @ b) + 2.0 * c with a full [M, N] matrix c (alpha=0.5, beta=2.0).
"""

import torch
from torch import nn


class Model(nn.Module):
    """y = 0.5 * (a @ b) + 2.0 * c with a full [M, N] matrix c (alpha=0.5, beta=2.0).
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [256, 512], uniform in [-1, 1)
            b: float32 tensor of shape [512, 256], uniform in [-1, 1)
            c: float32 tensor of shape [256, 256], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [256, 256]
        """
        return 0.5 * (a @ b) + 2.0 * c


def get_inputs():
    a = torch.rand(256, 512) * 2.0 - 1.0
    b = torch.rand(512, 256) * 2.0 - 1.0
    c = torch.rand(256, 256) * 2.0 - 1.0
    return [a, b, c]


def get_init_inputs():
    return []
