"""tensor / scatter_nd_rows: ONNX ScatterND (opset 20).

Copy of x with 256 distinct rows replaced by rows of updates (ScatterND; the row indices are the
constant (37 * k + 5) mod 1024, k = 0..255).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Copy of x with 256 distinct rows replaced by rows of updates (ScatterND; the row indices are the
    constant (37 * k + 5) mod 1024, k = 0..255).

    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):
        indices: int64 [256, 1], row index of each update, [256, 1]
    """

    def __init__(self):
        super().__init__()
        self.register_buffer("rows", (torch.arange(256) * 37 + 5) % 1024, persistent=False)

    def forward(self, x: torch.Tensor, updates: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [1024, 256], uniform in [-1, 1)
            updates: float32 tensor of shape [256, 256], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [1024, 256]
        """
        y = x.clone()
        y[self.rows] = updates
        return y


def get_inputs():
    x = torch.rand(1024, 256) * 2.0 - 1.0
    updates = torch.rand(256, 256) * 8 - 4
    return [x, updates]


def get_init_inputs():
    return []
