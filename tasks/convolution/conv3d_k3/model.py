"""convolution / conv3d_k3: ONNX Conv (opset 20).

3-D convolution: 16 -> 16 channels, kernel [3, 3, 3], stride [1, 1, 1], padding [1, 1, 1], dilation
[1, 1, 1], groups 1.
"""

import torch
from torch import nn


class Model(nn.Module):
    """3-D convolution: 16 -> 16 channels, kernel [3, 3, 3], stride [1, 1, 1], padding [1, 1, 1], dilation
    [1, 1, 1], groups 1.

    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):
        conv.weight: float32 [16, 16, 3, 3, 3], convolution weight
        conv.bias: float32 [16], bias per output channel
    """

    def __init__(self, in_channels=16, out_channels=16, kernel_size=(3, 3, 3), stride=(1, 1, 1), padding=(1, 1, 1), dilation=(1, 1, 1), groups=1, bias=True):
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.groups = groups
        self.bias = bias
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, dilation=dilation, groups=groups, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [1, 16, 16, 32, 32], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [1, 16, 16, 32, 32]
        """
        return self.conv(x)


IN_CHANNELS = 16
OUT_CHANNELS = 16
KERNEL_SIZE = (3, 3, 3)
STRIDE = (1, 1, 1)
PADDING = (1, 1, 1)
DILATION = (1, 1, 1)
GROUPS = 1
BIAS = True


def get_inputs():
    x = torch.rand(1, 16, 16, 32, 32) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL_SIZE, STRIDE, PADDING, DILATION, GROUPS, BIAS]
