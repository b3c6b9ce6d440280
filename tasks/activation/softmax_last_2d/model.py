"""activation / softmax_last_2d: ONNX Softmax (opset 20).

Softmax over the last axis of a [batch, classes] matrix.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Softmax over the last axis of a [batch, classes] matrix.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [1024, 1000], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [1024, 1000]
        """
        return torch.softmax(x, dim=-1)


def get_inputs():
    x = torch.rand(1024, 1000) * 8 - 4
    return [x]


def get_init_inputs():
    return []
