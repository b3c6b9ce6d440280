"""reduction / reduce_mean_axis0_2d: ONNX ReduceMean (opset 20).

Mean over axes [0] of a 2-D tensor, keepdims=1.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Mean over axes [0] of a 2-D tensor, keepdims=1.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4096, 256], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [1, 256]
        """
        return torch.mean(x, dim=0, keepdim=True)


def get_inputs():
    x = torch.rand(4096, 256) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
