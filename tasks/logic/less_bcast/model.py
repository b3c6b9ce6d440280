"""logic / less_bcast: ONNX Less (opset 20).

Element-wise a < b with b broadcast along the last axis.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise a < b with b broadcast along the last axis.
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [32, 256, 128], uniform in [-4, 4)
            b: float32 tensor of shape [256, 1], uniform in [-4, 4)
        Returns:
            y: bool tensor of shape [32, 256, 128]
        """
        return torch.lt(a, b)


def get_inputs():
    a = torch.rand(32, 256, 128) * 8 - 4
    b = torch.rand(256, 1) * 8 - 4
    return [a, b]


def get_init_inputs():
    return []
