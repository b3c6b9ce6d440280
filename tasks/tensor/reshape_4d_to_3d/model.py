"""tensor / reshape_4d_to_3d: ONNX Reshape (opset 20).

Reshape an NCHW tensor [4, 64, 56, 56] to [4, 64, 3136] (row-major).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Reshape an NCHW tensor [4, 64, 56, 56] to [4, 64, 3136] (row-major).

    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):
        shape: int64 [3], target shape
    """

    def __init__(self, shape=(4, 64, 3136)):
        super().__init__()
        self.shape = shape

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 64, 56, 56], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [4, 64, 3136]
        """
        return torch.reshape(x, tuple(self.shape))


SHAPE = (4, 64, 3136)


def get_inputs():
    x = torch.rand(4, 64, 56, 56) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return [SHAPE]
