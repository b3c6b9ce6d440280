"""Our own fixture: one Tanh node."""
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x)


rows = 8
cols = 32


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
