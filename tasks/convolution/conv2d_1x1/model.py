"""convolution / conv2d_1x1: ONNX Conv (opset 20).

2-D convolution: 64 -> 128 channels, kernel [1, 1], stride [1, 1], padding [0, 0], dilation [1, 1],
groups 1.
"""

import torch
from torch import nn


class Model(nn.Module):
    """2-D convolution: 64 -> 128 channels, kernel [1, 1], stride [1, 1], padding [0, 0], dilation [1, 1],
    groups 1.

    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):
        conv.weight: float32 [128, 64, 1, 1], convolution weight
        conv.bias: float32 [128], bias per output channel
    """

    def __init__(self, in_channels=64, out_channels=128, kernel_size=(1, 1), stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, bias=True):
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.groups = groups
        self.bias = bias
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, dilation=dilation, groups=groups, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [1, 64, 56, 56], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [1, 128, 56, 56]
        """
        return self.conv(x)


IN_CHANNELS = 64
OUT_CHANNELS = 128
KERNEL_SIZE = (1, 1)
STRIDE = (1, 1)
PADDING = (0, 0)
DILATION = (1, 1)
GROUPS = 1
BIAS = True


def get_inputs():
    x = torch.rand(1, 64, 56, 56) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL_SIZE, STRIDE, PADDING, DILATION, GROUPS, BIAS]
