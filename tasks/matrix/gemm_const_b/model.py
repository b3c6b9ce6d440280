"""matrix / gemm_const_b: ONNX Gemm (opset 20).

y = a @ weight + bias with a constant [K, N] weight (transB=0) and a bias row.
"""

import torch
from torch import nn


class Model(nn.Module):
    """y = a @ weight + bias with a constant [K, N] weight (transB=0) and a bias row.

    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):
        weight: float32 [512, 384], weight [K, N]
        bias: float32 [384], bias [N]
    """

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(512, 384) * 0.05)
        self.bias = nn.Parameter(torch.zeros(384))

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [256, 512], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [256, 384]
        """
        return a @ self.weight + self.bias


def get_inputs():
    a = torch.rand(256, 512) * 2.0 - 1.0
    return [a]


def get_init_inputs():
    return []
