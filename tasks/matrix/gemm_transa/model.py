"""matrix / gemm_transa: ONNX Gemm (opset 20).

y = a^T @ b with both operands as inputs (ONNX Gemm transA=1, no C).
"""

import torch
from torch import nn


class Model(nn.Module):
    """y = a^T @ b with both operands as inputs (ONNX Gemm transA=1, no C).
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [512, 256], uniform in [-1, 1)
            b: float32 tensor of shape [512, 384], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [256, 384]
        """
        return a.t() @ b


def get_inputs():
    a = torch.rand(512, 256) * 2.0 - 1.0
    b = torch.rand(512, 384) * 2.0 - 1.0
    return [a, b]


def get_init_inputs():
    return []
