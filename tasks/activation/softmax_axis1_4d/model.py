"""activation / softmax_axis1_4d: ONNX Softmax (opset 20).

Softmax over the channel axis of an NCHW tensor.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Softmax over the channel axis of an NCHW tensor.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 64, 32, 64], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [4, 64, 32, 64]
        """
        return torch.softmax(x, dim=1)


def get_inputs():
    x = torch.rand(4, 64, 32, 64) * 8 - 4
    return [x]


def get_init_inputs():
    return []
