"""matrix / einsum_attention_scores: ONNX Einsum (opset 20).

Attention scores q @ k^T per batch and head (einsum bhqd,bhkd->bhqk).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Attention scores q @ k^T per batch and head (einsum bhqd,bhkd->bhqk).
    """

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [2, 8, 128, 64], uniform in [-1, 1)
            b: float32 tensor of shape [2, 8, 128, 64], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [2, 8, 128, 128]
        """
        return torch.einsum('bhqd,bhkd->bhqk', a, b)


def get_inputs():
    a = torch.rand(2, 8, 128, 64) * 2.0 - 1.0
    b = torch.rand(2, 8, 128, 64) * 2.0 - 1.0
    return [a, b]


def get_init_inputs():
    return []
