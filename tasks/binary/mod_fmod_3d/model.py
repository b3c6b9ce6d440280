"""binary / mod_fmod_3d: ONNX Mod (opset 20).

Floating-point remainder a - trunc(a / b) * b (C fmod; the result has the sign of a), ONNX Mod with
fmod=1. The divisor is positive in [1, 5).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Floating-point remainder a - trunc(a / b) * b (C fmod; the result has the sign of a), ONNX Mod with
    fmod=1.
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [16, 256, 256], uniform in [-10, 10)
            b: float32 tensor of shape [16, 256, 256], uniform in [1, 5)
        Returns:
            y: float32 tensor of shape [16, 256, 256]
        """
        return torch.fmod(a, b)


def get_inputs():
    a = torch.rand(16, 256, 256) * 20.0 - 10.0
    b = torch.rand(16, 256, 256) * 4.0 + 1.0
    return [a, b]


def get_init_inputs():
    return []
