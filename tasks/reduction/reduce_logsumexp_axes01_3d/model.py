"""reduction / reduce_logsumexp_axes01_3d: ONNX ReduceLogSumExp (opset 20).

Log-sum-exp over axes [0, 1] of a 3-D tensor, keepdims=0.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Log-sum-exp over axes [0, 1] of a 3-D tensor, keepdims=0.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [64, 128, 128], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [128]
        """
        return torch.logsumexp(x, dim=(0, 1), keepdim=False)


def get_inputs():
    x = torch.rand(64, 128, 128) * 8.0 - 4.0
    return [x]


def get_init_inputs():
    return []
