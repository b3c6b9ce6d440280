"""normalization / layernorm_last2_3d: ONNX LayerNormalization (opset 20).

Layer normalization over the trailing dims [64, 256] (ONNX axis=-2), eps=1e-05, with an element-wise
affine transform.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Layer normalization over the trailing dims [64, 256] (ONNX axis=-2), eps=1e-05, with an element-wise
    affine transform.

    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):
        ln.weight: float32 [64, 256], scale (gamma)
        ln.bias: float32 [64, 256], shift (beta)
    """

    def __init__(self, normalized_shape=(64, 256)):
        super().__init__()
        self.normalized_shape = normalized_shape
        self.ln = nn.LayerNorm(normalized_shape, eps=1e-05)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [32, 64, 256], uniform in [-2, 2)
        Returns:
            y: float32 tensor of shape [32, 64, 256]
        """
        return self.ln(x)


NORMALIZED_SHAPE = (64, 256)


def get_inputs():
    x = torch.rand(32, 64, 256) * 4 - 2
    return [x]


def get_init_inputs():
    return [NORMALIZED_SHAPE]
