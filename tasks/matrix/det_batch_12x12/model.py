"""matrix / det_batch_12x12: ONNX Det (opset 20).

Determinants of a batch of 12x12 matrices.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Determinants of a batch of 12x12 matrices.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [1024, 12, 12], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [1024]
        """
        return torch.linalg.det(x)


def get_inputs():
    x = torch.rand(1024, 12, 12) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
