"""Our own fixture: BitwiseXor on int32, an op native MNN 3.2.2 has no converter for."""
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.bitwise_xor(a, b)


def get_inputs():
    return [torch.randint(0, 256, (8, 16), dtype=torch.int32), torch.randint(0, 256, (8, 16), dtype=torch.int32)]


def get_init_inputs():
    return []
