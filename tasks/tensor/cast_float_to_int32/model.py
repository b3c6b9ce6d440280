"""tensor / cast_float_to_int32: ONNX Cast (opset 20).

Cast float32 to int32 (truncation toward zero).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Cast float32 to int32 (truncation toward zero).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [32, 256, 128], uniform in [-1000, 1000)
        Returns:
            y: int32 tensor of shape [32, 256, 128]
        """
        return x.to(torch.int32)


def get_inputs():
    x = torch.rand(32, 256, 128) * 2000.0 - 1000.0
    return [x]


def get_init_inputs():
    return []
