"""matrix / gemm_transab_alpha: ONNX Gemm (opset 20).

y = 1.5 * a^T @ b^T (transA=1, transB=1, alpha=1.5, no C).
"""

import torch
from torch import nn


class Model(nn.Module):
    """y = 1.5 * a^T @ b^T (transA=1, transB=1, alpha=1.5, no C).
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [512, 256], uniform in [-1, 1)
            b: float32 tensor of shape [384, 512], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [256, 384]
        """
        return 1.5 * (a.t() @ b.t())


def get_inputs():
    a = torch.rand(512, 256) * 2.0 - 1.0
    b = torch.rand(384, 512) * 2.0 - 1.0
    return [a, b]


def get_init_inputs():
    return []
