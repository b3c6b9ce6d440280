"""binary / max_5d_bcast: ONNX Max (opset 20).

Element-wise maximum of a 5-D tensor and a 2-D tensor broadcast over the leading dims.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Element-wise maximum of a 5-D tensor and a 2-D tensor broadcast over the leading dims.
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [2, 8, 16, 32, 64], uniform in [-4, 4)
            b: float32 tensor of shape [32, 64], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [2, 8, 16, 32, 64]
        """
        return torch.maximum(a, b)


def get_inputs():
    a = torch.rand(2, 8, 16, 32, 64) * 8 - 4
    b = torch.rand(32, 64) * 8 - 4
    return [a, b]


def get_init_inputs():
    return []
