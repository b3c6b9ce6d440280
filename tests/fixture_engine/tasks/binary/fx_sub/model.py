import torch
import torch.nn as nn


class Model(nn.Module):
    """Element-wise subtraction with broadcasting."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a - b


def get_inputs():
    return [torch.rand(64, 512) * 2 - 1, torch.rand(512) * 2 - 1]


def get_init_inputs():
    return []
