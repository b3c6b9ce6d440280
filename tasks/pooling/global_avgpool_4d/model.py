"""pooling / global_avgpool_4d: ONNX GlobalAveragePool (opset 20).

Global average pooling of a 4-D tensor over all spatial dims (kept as size 1).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Global average pooling of a 4-D tensor over all spatial dims (kept as size 1).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [8, 256, 28, 28], normal with mean 0 and std 1
        Returns:
            y: float32 tensor of shape [8, 256, 1, 1]
        """
        return torch.mean(x, dim=(2, 3), keepdim=True)


def get_inputs():
    x = torch.randn(8, 256, 28, 28) * 1.0
    return [x]


def get_init_inputs():
    return []
