"""trigonometry / asin_1d: ONNX Asin (opset 20).

Element-wise Asin: y = torch.asin(x). Inputs are inside Asin's domain [-1, 1].
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise Asin: y = torch.asin(x).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [262144], uniform in [-0.99, 0.99)
        Returns:
            y: float32 tensor of shape [262144]
        """
        return torch.asin(x)


def get_inputs():
    x = torch.rand(262144,) * 1.98 - 0.99
    return [x]


def get_init_inputs():
    return []
