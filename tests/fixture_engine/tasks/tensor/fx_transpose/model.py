import torch
import torch.nn as nn


class Model(nn.Module):
    """Permute the dimensions of a 4-D tensor."""

    def __init__(self, perm: tuple[int, ...]):
        super().__init__()
        self.perm = perm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.permute(*self.perm)


def get_inputs():
    return [torch.randn(8, 16, 32, 24)]


def get_init_inputs():
    return [(0, 2, 3, 1)]
