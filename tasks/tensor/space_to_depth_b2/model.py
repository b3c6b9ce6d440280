"""tensor / space_to_depth_b2: ONNX SpaceToDepth (opset 20).

SpaceToDepth with block size 2: [N, C, H, W] -> [N, 4C, H/2, W/2].
"""

import torch
from torch import nn


class Model(nn.Module):
    """SpaceToDepth with block size 2: [N, C, H, W] -> [N, 4C, H/2, W/2].
    """

    def __init__(self, blocksize=2):
        super().__init__()
        self.blocksize = blocksize

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [1, 64, 112, 112], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [1, 256, 56, 56]
        """
        n, c, h, w = x.shape
        bs = self.blocksize
        y = x.reshape(n, c, h // bs, bs, w // bs, bs).permute(0, 3, 5, 1, 2, 4)
        return y.reshape(n, c * bs * bs, h // bs, w // bs)


BLOCKSIZE = 2


def get_inputs():
    x = torch.rand(1, 64, 112, 112) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return [BLOCKSIZE]
