"""tensor / concat_last_3d: ONNX Concat (opset 20).

Concatenate two 3-D tensors along the last axis (axis=-1).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Concatenate two 3-D tensors along the last axis (axis=-1).
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [64, 256, 40], uniform in [-1, 1)
            b: float32 tensor of shape [64, 256, 24], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [64, 256, 64]
        """
        return torch.cat([a, b], dim=-1)


def get_inputs():
    a = torch.rand(64, 256, 40) * 2.0 - 1.0
    b = torch.rand(64, 256, 24) * 2.0 - 1.0
    return [a, b]


def get_init_inputs():
    return []
