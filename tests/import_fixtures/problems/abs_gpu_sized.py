"""Our own fixture: a GPU-sized problem (2 x 64 MiB of float32), scaled down to the budget."""
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return torch.abs(x)


batch_size = 4096
dim = 4096


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
