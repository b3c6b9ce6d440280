"""matrix / det_batch_8x8: ONNX Det (opset 20).

Determinants of a batch of 8x8 matrices.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Determinants of a batch of 8x8 matrices.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [2048, 8, 8], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [2048]
        """
        return torch.linalg.det(x)


def get_inputs():
    x = torch.rand(2048, 8, 8) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
