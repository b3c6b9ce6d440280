"""reduction / reduce_mean_hw_4d: ONNX ReduceMean (opset 20).

Mean over axes [2, 3] of a 4-D tensor, keepdims=0.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Mean over axes [2, 3] of a 4-D tensor, keepdims=0.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 64, 56, 56], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [4, 64]
        """
        return torch.mean(x, dim=(2, 3), keepdim=False)


def get_inputs():
    x = torch.rand(4, 64, 56, 56) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
