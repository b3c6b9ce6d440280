"""tensor / depth_to_space_dcr: ONNX DepthToSpace (opset 20).

DepthToSpace with block size 2 in DCR mode: [N, C, H, W] -> [N, C/4, 2H, 2W].
"""

import torch
from torch import nn


class Model(nn.Module):
    """DepthToSpace with block size 2 in DCR mode: [N, C, H, W] -> [N, C/4, 2H, 2W].
    """

    def __init__(self, blocksize=2):
        super().__init__()
        self.blocksize = blocksize

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [1, 256, 56, 56], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [1, 64, 112, 112]
        """
        n, c, h, w = x.shape
        bs = self.blocksize
        y = x.reshape(n, bs, bs, c // (bs * bs), h, w).permute(0, 3, 4, 1, 5, 2)
        return y.reshape(n, c // (bs * bs), h * bs, w * bs)


BLOCKSIZE = 2


def get_inputs():
    x = torch.rand(1, 256, 56, 56) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return [BLOCKSIZE]
