"""activation / softmax_axis0_3d: ONNX Softmax (opset 20).

Softmax over the first axis of a 3-D tensor.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Softmax over the first axis of a 3-D tensor.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [32, 128, 128], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [32, 128, 128]
        """
        return torch.softmax(x, dim=0)


def get_inputs():
    x = torch.rand(32, 128, 128) * 8 - 4
    return [x]


def get_init_inputs():
    return []
