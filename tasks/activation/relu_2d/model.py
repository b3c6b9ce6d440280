"""activation / relu_2d: ONNX Relu (opset 20).

ReLU: y = max(x, 0).
"""

import torch
from torch import nn


class Model(nn.Module):
    """ReLU: y = max(x, 0).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [2048, 512], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [2048, 512]
        """
        return torch.relu(x)


def get_inputs():
    x = torch.rand(2048, 512) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
