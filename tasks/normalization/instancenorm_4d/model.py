"""normalization / instancenorm_4d: ONNX InstanceNormalization (opset 20).

Instance normalization of a 4-D tensor (statistics per sample and channel over the spatial dims),
eps=1e-05, with per-channel scale and shift.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Instance normalization of a 4-D tensor (statistics per sample and channel over the spatial dims),
    eps=1e-05, with per-channel scale and shift.

    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):
        inorm.weight: float32 [64], per-channel scale
        inorm.bias: float32 [64], per-channel shift
    """

    def __init__(self, num_features=64):
        super().__init__()
        self.num_features = num_features
        self.inorm = nn.InstanceNorm2d(num_features, eps=1e-05, affine=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 64, 56, 56], uniform in [-2, 2)
        Returns:
            y: float32 tensor of shape [4, 64, 56, 56]
        """
        return self.inorm(x)


NUM_FEATURES = 64


def get_inputs():
    x = torch.rand(4, 64, 56, 56) * 4 - 2
    return [x]


def get_init_inputs():
    return [NUM_FEATURES]
