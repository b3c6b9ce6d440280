"""Our own fixture: a Linear layer times a scalar (Gemm then Mul: folded into Gemm alpha/beta)."""
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, n_in, n_out, scale):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)
        self.scale = scale

    def forward(self, x):
        return self.fc(x) * self.scale


def get_inputs():
    return [torch.rand(4, 16) * 2 - 1]


def get_init_inputs():
    return [16, 8, 0.5]
