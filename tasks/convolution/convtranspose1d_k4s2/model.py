"""convolution / convtranspose1d_k4s2: ONNX ConvTranspose (opset 20).

1-D transposed convolution: 64 -> 32 channels, kernel [4], stride [2], padding [1], dilation [1],
groups 1.
"""

import torch
from torch import nn


class Model(nn.Module):
    """1-D transposed convolution: 64 -> 32 channels, kernel [4], stride [2], padding [1], dilation [1],
    groups 1.

    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):
        conv.weight: float32 [64, 32, 4], convolution weight
        conv.bias: float32 [32], bias per output channel
    """

    def __init__(self, in_channels=64, out_channels=32, kernel_size=(4,), stride=(2,), padding=(1,), dilation=(1,), groups=1, bias=True):
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.groups = groups
        self.bias = bias
        self.conv = nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, dilation=dilation, groups=groups, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [2, 64, 256], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [2, 32, 512]
        """
        return self.conv(x)


IN_CHANNELS = 64
OUT_CHANNELS = 32
KERNEL_SIZE = (4,)
STRIDE = (2,)
PADDING = (1,)
DILATION = (1,)
GROUPS = 1
BIAS = True


def get_inputs():
    x = torch.rand(2, 64, 256) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL_SIZE, STRIDE, PADDING, DILATION, GROUPS, BIAS]
