"""tensor / gather_nd_pairs: ONNX GatherND (opset 20).

Gather rows x[i, j, :] for 4096 index pairs (i, j) (GatherND, batch_dims 0).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Gather rows x[i, j, :] for 4096 index pairs (i, j) (GatherND, batch_dims 0).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [128, 128, 64], uniform in [-1, 1)
            indices: int64 tensor of shape [4096, 2], random integers in [0, 127]
        Returns:
            y: float32 tensor of shape [4096, 64]
        """
        return x[indices[:, 0], indices[:, 1]]


def get_inputs():
    x = torch.rand(128, 128, 64) * 2.0 - 1.0
    indices = torch.randint(0, 128, (4096, 2), dtype=torch.int64)
    return [x, indices]


def get_init_inputs():
    return []
