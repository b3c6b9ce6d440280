"""activation / relu_4d: ONNX Relu (opset 20).

ReLU on an NCHW feature map.
"""

import torch
from torch import nn


class Model(nn.Module):
    """ReLU on an NCHW feature map.
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
        return torch.relu(x)


def get_inputs():
    x = torch.rand(8, 64, 56, 56) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
