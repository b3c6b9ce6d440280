"""trigonometry / acos_4d: ONNX Acos (opset 20).

Element-wise Acos: y = torch.acos(x). Inputs are inside Acos's domain [-1, 1].
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise Acos: y = torch.acos(x).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 64, 32, 32], uniform in [-0.99, 0.99)
        Returns:
            y: float32 tensor of shape [4, 64, 32, 32]
        """
        return torch.acos(x)


def get_inputs():
    x = torch.rand(4, 64, 32, 32) * 1.98 - 0.99
    return [x]


def get_init_inputs():
    return []
