"""tensor / slice_reverse_step2_3d: ONNX Slice (opset 20).

Slice with steps: axis 1 reversed taking every second element from the end (step -2), axis 2
elements 0..63 with step 2.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Slice with steps: axis 1 reversed taking every second element from the end (step -2), axis 2
    elements 0..63 with step 2.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [64, 256, 128], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [64, 128, 32]
        """
        return torch.flip(x, dims=[1])[:, ::2, 0:64:2]


def get_inputs():
    x = torch.rand(64, 256, 128) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
