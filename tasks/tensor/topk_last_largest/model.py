"""tensor / topk_last_largest: ONNX TopK (opset 20).

The 16 largest values of each row and their int64 indices, sorted descending (TopK axis -1).
"""

import torch
from torch import nn


class Model(nn.Module):
    """The 16 largest values of each row and their int64 indices, sorted descending (TopK axis -1).

    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):
        k: int64 [1], k
    """

    def __init__(self, k=16):
        super().__init__()
        self.k = k

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """
        Args:
            x: float32 tensor of shape [1024, 512], normal with mean 0 and std 1
        Returns:
            values: float32 tensor of shape [1024, 16]
            indices: int64 tensor of shape [1024, 16]
        """
        values, indices = torch.topk(x, self.k, dim=-1, largest=True, sorted=True)
        return values, indices


K = 16


def get_inputs():
    x = torch.randn(1024, 512) * 1.0
    return [x]


def get_init_inputs():
    return [K]
