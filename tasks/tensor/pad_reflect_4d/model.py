"""tensor / pad_reflect_4d: ONNX Pad (opset 20).

Reflect padding of H and W by 2 on each side of an NCHW tensor.
"""

import torch
from torch import nn
from torch.nn import functional as F


class Model(nn.Module):
    """Reflect padding of H and W by 2 on each side of an NCHW tensor.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 64, 56, 56], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [4, 64, 60, 60]
        """
        return F.pad(x, (2, 2, 2, 2), mode="reflect")


def get_inputs():
    x = torch.rand(4, 64, 56, 56) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
