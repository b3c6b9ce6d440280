"""pooling / maxpool3d_k2s2: ONNX MaxPool (opset 20).

3-D max pooling, kernel [2, 2, 2], stride [2, 2, 2], padding [0, 0, 0].
"""

import torch
from torch import nn
from torch.nn import functional as F


class Model(nn.Module):
    """3-D max pooling, kernel [2, 2, 2], stride [2, 2, 2], padding [0, 0, 0].
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [2, 32, 16, 32, 32], normal with mean 0 and std 1
        Returns:
            y: float32 tensor of shape [2, 32, 8, 16, 16]
        """
        return F.max_pool3d(x, kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0), ceil_mode=False)


def get_inputs():
    x = torch.randn(2, 32, 16, 32, 32) * 1.0
    return [x]


def get_init_inputs():
    return []
