"""tensor / cumsum_reverse_axis1: ONNX CumSum (opset 20).

Reverse cumulative sum along axis 1: y[i, j] = sum of x[i, j:] (CumSum reverse=1).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Reverse cumulative sum along axis 1: y[i, j] = sum of x[i, j:] (CumSum reverse=1).

    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):
        axis: int64 [], axis (scalar)
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [64, 4096], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [64, 4096]
        """
        return torch.flip(torch.cumsum(torch.flip(x, dims=[1]), dim=1), dims=[1])


def get_inputs():
    x = torch.rand(64, 4096) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
