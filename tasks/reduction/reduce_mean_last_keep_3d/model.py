"""reduction / reduce_mean_last_keep_3d: ONNX ReduceMean (opset 20).

Mean over axes [-1] of a 3-D tensor, keepdims=1.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Mean over axes [-1] of a 3-D tensor, keepdims=1.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [64, 256, 64], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [64, 256, 1]
        """
        return torch.mean(x, dim=-1, keepdim=True)


def get_inputs():
    x = torch.rand(64, 256, 64) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
