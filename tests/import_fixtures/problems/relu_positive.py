"""Our own fixture: ReLU on positive-only inputs (torch.rand), where an identity kernel passes: weak."""
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(16, 64)]


def get_init_inputs():
    return []
