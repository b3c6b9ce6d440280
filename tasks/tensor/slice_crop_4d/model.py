"""tensor / slice_crop_4d: ONNX Slice (opset 20).

Crop a window x[:, :, 4:52, 8:-8] of an NCHW tensor (axes [2, 3], step 1).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Crop a window x[:, :, 4:52, 8:-8] of an NCHW tensor (axes [2, 3], step 1).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 64, 56, 56], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [4, 64, 48, 40]
        """
        return x[:, :, 4:52, 8:-8]


def get_inputs():
    x = torch.rand(4, 64, 56, 56) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
