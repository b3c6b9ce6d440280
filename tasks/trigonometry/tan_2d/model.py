"""trigonometry / tan_2d: ONNX Tan (opset 20).

Element-wise Tan: y = torch.tan(x). Inputs stay inside (-1.4, 1.4), away from the poles at +-pi/2.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise Tan: y = torch.tan(x).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [512, 512], uniform in [-1.4, 1.4)
        Returns:
            y: float32 tensor of shape [512, 512]
        """
        return torch.tan(x)


def get_inputs():
    x = torch.rand(512, 512) * 2.8 - 1.4
    return [x]


def get_init_inputs():
    return []
