"""reduction / reduce_mean_all_keep_3d: ONNX ReduceMean (opset 20).

Mean over all axes (no axes input) of a 3-D tensor, keepdims=1.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Mean over all axes (no axes input) of a 3-D tensor, keepdims=1.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [64, 128, 128], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [1, 1, 1]
        """
        return torch.mean(x, dim=(0, 1, 2), keepdim=True)


def get_inputs():
    x = torch.rand(64, 128, 128) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
