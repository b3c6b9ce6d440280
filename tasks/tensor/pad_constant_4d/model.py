"""tensor / pad_constant_4d: ONNX Pad (opset 20).

Constant padding (value 0.5) of H by (1, 3) and W by (2, 4) of an NCHW tensor.
"""

import torch
from torch import nn
from torch.nn import functional as F


class Model(nn.Module):
    """Constant padding (value 0.5) of H by (1, 3) and W by (2, 4) of an NCHW tensor.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 64, 56, 56], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [4, 64, 60, 62]
        """
        return F.pad(x, (2, 4, 1, 3), mode="constant", value=0.5)


def get_inputs():
    x = torch.rand(4, 64, 56, 56) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
