"""tensor / gather_elements_axis1: ONNX GatherElements (opset 20).

y[i][j] = x[i][indices[i][j]] (GatherElements / torch.gather along axis 1).
"""

import torch
from torch import nn


class Model(nn.Module):
    """y[i][j] = x[i][indices[i][j]] (GatherElements / torch.gather along axis 1).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [512, 512], uniform in [-1, 1)
            indices: int64 tensor of shape [512, 256], random integers in [0, 511]
        Returns:
            y: float32 tensor of shape [512, 256]
        """
        return torch.gather(x, 1, indices)


def get_inputs():
    x = torch.rand(512, 512) * 2.0 - 1.0
    indices = torch.randint(0, 512, (512, 256), dtype=torch.int64)
    return [x, indices]


def get_init_inputs():
    return []
