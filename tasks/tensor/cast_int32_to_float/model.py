"""tensor / cast_int32_to_float: ONNX Cast (opset 20).

Cast int32 to float32.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Cast int32 to float32.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: int32 tensor of shape [32, 256, 128], random integers in [-100000, 100000]
        Returns:
            y: float32 tensor of shape [32, 256, 128]
        """
        return x.to(torch.float32)


def get_inputs():
    x = torch.randint(-100000, 100001, (32, 256, 128), dtype=torch.int32)
    return [x]


def get_init_inputs():
    return []
