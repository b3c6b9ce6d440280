"""normalization / layernorm_2d_eps1e6: ONNX LayerNormalization (opset 20).

Layer normalization over the trailing dims [768] (ONNX axis=-1), eps=1e-06, with an element-wise
affine transform.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Layer normalization over the trailing dims [768] (ONNX axis=-1), eps=1e-06, with an element-wise
    affine transform.

    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):
        ln.weight: float32 [768], scale (gamma)
        ln.bias: float32 [768], shift (beta)
    """

    def __init__(self, normalized_shape=(768,)):
        super().__init__()
        self.normalized_shape = normalized_shape
        self.ln = nn.LayerNorm(normalized_shape, eps=1e-06)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [2048, 768], uniform in [-2, 2)
        Returns:
            y: float32 tensor of shape [2048, 768]
        """
        return self.ln(x)


NORMALIZED_SHAPE = (768,)


def get_inputs():
    x = torch.rand(2048, 768) * 4 - 2
    return [x]


def get_init_inputs():
    return [NORMALIZED_SHAPE]
