"""convolution / convtranspose2d_dilation2_no_bias: ONNX ConvTranspose (opset 20).

2-D transposed convolution: 16 -> 16 channels, kernel [3, 3], stride [1, 1], padding [0, 0],
dilation [2, 2], groups 1, no bias.
"""

import torch
from torch import nn


class Model(nn.Module):
    """2-D transposed convolution: 16 -> 16 channels, kernel [3, 3], stride [1, 1], padding [0, 0],
    dilation [2, 2], groups 1, no bias.

    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):
        conv.weight: float32 [16, 16, 3, 3], convolution weight
    """

    def __init__(self, in_channels=16, out_channels=16, kernel_size=(3, 3), stride=(1, 1), padding=(0, 0), dilation=(2, 2), groups=1, bias=False):
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.groups = groups
        self.bias = bias
        self.conv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, dilation=dilation, groups=groups, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [1, 16, 32, 32], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [1, 16, 36, 36]
        """
        return self.conv(x)


IN_CHANNELS = 16
OUT_CHANNELS = 16
KERNEL_SIZE = (3, 3)
STRIDE = (1, 1)
PADDING = (0, 0)
DILATION = (2, 2)
GROUPS = 1
BIAS = False


def get_inputs():
    x = torch.rand(1, 16, 32, 32) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL_SIZE, STRIDE, PADDING, DILATION, GROUPS, BIAS]
