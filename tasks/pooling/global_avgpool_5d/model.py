"""pooling / global_avgpool_5d: ONNX GlobalAveragePool (opset 20).

Global average pooling of a 5-D tensor over all spatial dims (kept as size 1).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Global average pooling of a 5-D tensor over all spatial dims (kept as size 1).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [2, 64, 8, 32, 32], normal with mean 0 and std 1
        Returns:
            y: float32 tensor of shape [2, 64, 1, 1, 1]
        """
        return torch.mean(x, dim=(2, 3, 4), keepdim=True)


def get_inputs():
    x = torch.randn(2, 64, 8, 32, 32) * 1.0
    return [x]


def get_init_inputs():
    return []
