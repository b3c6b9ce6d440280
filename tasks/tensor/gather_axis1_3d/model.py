"""tensor / gather_axis1_3d: ONNX Gather (opset 20).

Select 256 of the 1024 positions of axis 1 with a 1-D int64 index vector (Gather axis 1, repeated
indices allowed).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Select 256 of the 1024 positions of axis 1 with a 1-D int64 index vector (Gather axis 1, repeated
    indices allowed).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [16, 1024, 64], uniform in [-1, 1)
            indices: int64 tensor of shape [256], random integers in [0, 1023]
        Returns:
            y: float32 tensor of shape [16, 256, 64]
        """
        return torch.index_select(x, 1, indices)


def get_inputs():
    x = torch.rand(16, 1024, 64) * 2.0 - 1.0
    indices = torch.randint(0, 1024, (256,), dtype=torch.int64)
    return [x, indices]


def get_init_inputs():
    return []
