"""unary / round_2d: ONNX Round (opset 20).

Element-wise Round: y = torch.round(x). Round halves to even (as torch.round and numpy.round).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise Round: y = torch.round(x).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [2048, 512], uniform in [-10, 10)
        Returns:
            y: float32 tensor of shape [2048, 512]
        """
        return torch.round(x)


def get_inputs():
    x = torch.rand(2048, 512) * 20 - 10
    return [x]


def get_init_inputs():
    return []
