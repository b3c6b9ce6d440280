"""activation / leaky_relu_4d: ONNX LeakyRelu (opset 20).

Leaky ReLU with slope 0.01: y = x if x >= 0 else 0.01 * x.
"""

import torch
from torch import nn
from torch.nn import functional as F


class Model(nn.Module):
    """Leaky ReLU with slope 0.01: y = x if x >= 0 else 0.01 * x.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [8, 64, 56, 56], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [8, 64, 56, 56]
        """
        return F.leaky_relu(x, negative_slope=0.01)


def get_inputs():
    x = torch.rand(8, 64, 56, 56) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
