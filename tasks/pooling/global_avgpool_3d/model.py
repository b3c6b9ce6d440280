"""pooling / global_avgpool_3d: ONNX GlobalAveragePool (opset 20).

Global average pooling of a 3-D tensor over all spatial dims (kept as size 1).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Global average pooling of a 3-D tensor over all spatial dims (kept as size 1).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [16, 256, 256], normal with mean 0 and std 1
        Returns:
            y: float32 tensor of shape [16, 256, 1]
        """
        return torch.mean(x, dim=(2,), keepdim=True)


def get_inputs():
    x = torch.randn(16, 256, 256) * 1.0
    return [x]


def get_init_inputs():
    return []
