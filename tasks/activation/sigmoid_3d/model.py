"""activation / sigmoid_3d: ONNX Sigmoid (opset 20).

Logistic sigmoid y = 1 / (1 + exp(-x)).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Logistic sigmoid y = 1 / (1 + exp(-x)).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [32, 256, 128], uniform in [-6, 6)
        Returns:
            y: float32 tensor of shape [32, 256, 128]
        """
        return torch.sigmoid(x)


def get_inputs():
    x = torch.rand(32, 256, 128) * 12 - 6
    return [x]


def get_init_inputs():
    return []
