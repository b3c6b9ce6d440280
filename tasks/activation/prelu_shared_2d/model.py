"""activation / prelu_shared_2d: ONNX PRelu (opset 20).

PReLU with one slope per column of a [rows, features] matrix (broadcast over rows).
"""

import torch
from torch import nn


class Model(nn.Module):
    """PReLU with one slope per column of a [rows, features] matrix (broadcast over rows).

    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):
        slope: float32 [512], negative slope per feature
    """

    def __init__(self, features=512):
        super().__init__()
        self.features = features
        self.slope = nn.Parameter(torch.full((features,), 0.25))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [1024, 512], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [1024, 512]
        """
        return torch.where(x >= 0, x, self.slope * x)


FEATURES = 512


def get_inputs():
    x = torch.rand(1024, 512) * 8 - 4
    return [x]


def get_init_inputs():
    return [FEATURES]
