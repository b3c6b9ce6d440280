"""reduction / reduce_logsumexp_last_2d: ONNX ReduceLogSumExp (opset 20).

Log-sum-exp over axes [-1] of a 2-D tensor, keepdims=0.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Log-sum-exp over axes [-1] of a 2-D tensor, keepdims=0.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [1024, 1024], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [1024]
        """
        return torch.logsumexp(x, dim=-1, keepdim=False)


def get_inputs():
    x = torch.rand(1024, 1024) * 8.0 - 4.0
    return [x]


def get_init_inputs():
    return []
