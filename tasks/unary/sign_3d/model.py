"""unary / sign_3d: ONNX Sign (opset 20).

Element-wise Sign: y = torch.sign(x).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise Sign: y = torch.sign(x).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [64, 128, 128], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [64, 128, 128]
        """
        return torch.sign(x)


def get_inputs():
    x = torch.rand(64, 128, 128) * 2 - 1
    return [x]


def get_init_inputs():
    return []
