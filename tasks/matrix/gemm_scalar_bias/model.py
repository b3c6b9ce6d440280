"""matrix / gemm_scalar_bias: ONNX Gemm (opset 20).

y = a @ weight + bias where bias is a single value broadcast to [M, N].
"""

import torch
from torch import nn


class Model(nn.Module):
    """y = a @ weight + bias where bias is a single value broadcast to [M, N].

    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):
        weight: float32 [256, 256], weight [K, N]
        bias: float32 [1], scalar bias, shape [1]
    """

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(256, 256) * 0.05)
        self.bias = nn.Parameter(torch.zeros(1))

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [1024, 256], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [1024, 256]
        """
        return a @ self.weight + self.bias


def get_inputs():
    a = torch.rand(1024, 256) * 2.0 - 1.0
    return [a]


def get_init_inputs():
    return []
