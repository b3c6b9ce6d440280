"""trigonometry / acosh_2d: ONNX Acosh (opset 20).

Element-wise Acosh: y = torch.acosh(x). Inputs are >= 1.01 (Acosh's domain is [1, inf)).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise Acosh: y = torch.acosh(x).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [512, 512], uniform in [1.01, 10)
        Returns:
            y: float32 tensor of shape [512, 512]
        """
        return torch.acosh(x)


def get_inputs():
    x = torch.rand(512, 512) * 8.99 + 1.01
    return [x]


def get_init_inputs():
    return []
