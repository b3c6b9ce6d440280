"""activation / prelu_channel_4d: ONNX PRelu (opset 20).

PReLU with one learned slope per channel: y = x if x >= 0 else slope[c] * x.
"""

import torch
from torch import nn


class Model(nn.Module):
    """PReLU with one learned slope per channel: y = x if x >= 0 else slope[c] * x.

    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):
        slope: float32 [64, 1, 1], per-channel negative slope, broadcast as [C, 1, 1]
    """

    def __init__(self, channels=64):
        super().__init__()
        self.channels = channels
        self.slope = nn.Parameter(torch.full((channels, 1, 1), 0.25))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 64, 56, 56], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [4, 64, 56, 56]
        """
        return torch.where(x >= 0, x, self.slope * x)


CHANNELS = 64


def get_inputs():
    x = torch.rand(4, 64, 56, 56) * 8 - 4
    return [x]


def get_init_inputs():
    return [CHANNELS]
