"""tensor / transpose_nchw_to_nhwc: ONNX Transpose (opset 20).

Permute an NCHW tensor to NHWC (perm [0, 2, 3, 1]).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Permute an NCHW tensor to NHWC (perm [0, 2, 3, 1]).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 64, 56, 56], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [4, 56, 56, 64]
        """
        return x.permute(0, 2, 3, 1)


def get_inputs():
    x = torch.rand(4, 64, 56, 56) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return []
