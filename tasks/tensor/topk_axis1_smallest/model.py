"""tensor / topk_axis1_smallest: ONNX TopK (opset 20).

The 8 smallest values along axis 1 of a 3-D tensor and their int64 indices, sorted ascending.
"""

import torch
from torch import nn


class Model(nn.Module):
    """The 8 smallest values along axis 1 of a 3-D tensor and their int64 indices, sorted ascending.

    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):
        k: int64 [1], k
    """

    def __init__(self, k=8):
        super().__init__()
        self.k = k

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """
        Args:
            x: float32 tensor of shape [16, 1024, 32], normal with mean 0 and std 1
        Returns:
            values: float32 tensor of shape [16, 8, 32]
            indices: int64 tensor of shape [16, 8, 32]
        """
        values, indices = torch.topk(x, self.k, dim=1, largest=False, sorted=True)
        return values, indices


K = 8


def get_inputs():
    x = torch.randn(16, 1024, 32) * 1.0
    return [x]


def get_init_inputs():
    return [K]
