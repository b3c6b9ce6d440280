"""activation / leaky_relu_3d_alpha02: ONNX LeakyRelu (opset 20).

Leaky ReLU with slope 0.2.
"""

import torch
from torch import nn
from torch.nn import functional as F


class Model(nn.Module):
    """Leaky ReLU with slope 0.2.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [32, 256, 128], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [32, 256, 128]
        """
        return F.leaky_relu(x, negative_slope=0.2)


def get_inputs():
    x = torch.rand(32, 256, 128) * 8 - 4
    return [x]


def get_init_inputs():
    return []
