"""reduction / reduce_logsumexp_axis1_keep_4d: ONNX ReduceLogSumExp (opset 20).

Log-sum-exp over axes [1] of a 4-D tensor, keepdims=1.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Log-sum-exp over axes [1] of a 4-D tensor, keepdims=1.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 64, 56, 56], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [4, 1, 56, 56]
        """
        return torch.logsumexp(x, dim=1, keepdim=True)


def get_inputs():
    x = torch.rand(4, 64, 56, 56) * 8.0 - 4.0
    return [x]


def get_init_inputs():
    return []
