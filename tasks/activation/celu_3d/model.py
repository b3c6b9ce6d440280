"""activation / celu_3d: ONNX Celu (opset 20).

CELU with alpha 0.5: y = max(0, x) + min(0, 0.5 * (exp(x / 0.5) - 1)).
"""

import torch
from torch import nn
from torch.nn import functional as F


class Model(nn.Module):
    """CELU with alpha 0.5: y = max(0, x) + min(0, 0.5 * (exp(x / 0.5) - 1)).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [16, 256, 128], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [16, 256, 128]
        """
        return F.celu(x, alpha=0.5)


def get_inputs():
    x = torch.rand(16, 256, 128) * 8 - 4
    return [x]


def get_init_inputs():
    return []
