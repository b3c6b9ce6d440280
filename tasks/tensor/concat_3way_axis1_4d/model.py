"""tensor / concat_3way_axis1_4d: ONNX Concat (opset 20).

Concatenate three NCHW tensors along the channel axis.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Concatenate three NCHW tensors along the channel axis.
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [4, 32, 56, 56], uniform in [-1, 1)
            b: float32 tensor of shape [4, 16, 56, 56], uniform in [-1, 1)
            c: float32 tensor of shape [4, 48, 56, 56], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [4, 96, 56, 56]
        """
        return torch.cat([a, b, c], dim=1)


def get_inputs():
    a = torch.rand(4, 32, 56, 56) * 2.0 - 1.0
    b = torch.rand(4, 16, 56, 56) * 2.0 - 1.0
    c = torch.rand(4, 48, 56, 56) * 2.0 - 1.0
    return [a, b, c]


def get_init_inputs():
    return []
