"""tensor / gather_embedding: ONNX Gather (opset 20).

Embedding lookup: rows of a [8192, 256] table selected by int64 indices of shape [64, 128] (Gather
axis 0).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Embedding lookup: rows of a [8192, 256] table selected by int64 indices of shape [64, 128] (Gather
    axis 0).
    """

    def __init__(self):
        super().__init__()

    def forward(self, table: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        """
        Args:
            table: float32 tensor of shape [8192, 256], uniform in [-1, 1)
            indices: int64 tensor of shape [64, 128], random integers in [0, 8191]
        Returns:
            y: float32 tensor of shape [64, 128, 256]
        """
        return table[indices]


def get_inputs():
    table = torch.rand(8192, 256) * 2.0 - 1.0
    indices = torch.randint(0, 8192, (64, 128), dtype=torch.int64)
    return [table, indices]


def get_init_inputs():
    return []
