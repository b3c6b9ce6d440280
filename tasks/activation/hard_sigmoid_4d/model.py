"""activation / hard_sigmoid_4d: ONNX HardSigmoid (opset 20).

Hard sigmoid y = clip(0.2 * x + 0.5, 0, 1) (ONNX alpha=0.2, beta=0.5).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Hard sigmoid y = clip(0.2 * x + 0.5, 0, 1) (ONNX alpha=0.2, beta=0.5).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [4, 64, 56, 56], uniform in [-4, 4)
        Returns:
            y: float32 tensor of shape [4, 64, 56, 56]
        """
        return torch.clamp(0.2 * x + 0.5, 0.0, 1.0)


def get_inputs():
    x = torch.rand(4, 64, 56, 56) * 8 - 4
    return [x]


def get_init_inputs():
    return []
