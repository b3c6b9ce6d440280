import torch
import torch.nn as nn


class Model(nn.Module):
    """ArgMax over one dimension (indices as int64)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(x, dim=self.dim)


def get_inputs():
    return [torch.rand(16, 129, 64) * 2 - 1]


def get_init_inputs():
    return [1]
