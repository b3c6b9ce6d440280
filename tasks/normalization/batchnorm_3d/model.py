"""normalization / batchnorm_3d: ONNX BatchNormalization (opset 20).

Batch normalization in inference mode over channel axis 1 of a 3-D tensor: y = (x - running_mean) /
sqrt(running_var + eps) * weight + bias, eps = 1e-5.
"""

import torch
from torch import nn
from torch.nn import functional as F


class Model(nn.Module):
    """Batch normalization in inference mode over channel axis 1 of a 3-D tensor: y = (x - running_mean) /
    sqrt(running_var + eps) * weight + bias, eps = 1e-5.

    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):
        bn.weight: float32 [128], scale (gamma)
        bn.bias: float32 [128], shift (beta)
        bn.running_mean: float32 [128], running mean
        bn.running_var: float32 [128], running variance (positive)
    """

    def __init__(self, num_features=128):
        super().__init__()
        self.num_features = num_features
        self.bn = nn.BatchNorm1d(num_features, eps=1e-5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [16, 128, 512], uniform in [-2, 2)
        Returns:
            y: float32 tensor of shape [16, 128, 512]
        """
        return F.batch_norm(x, self.bn.running_mean, self.bn.running_var, self.bn.weight, self.bn.bias,
                            training=False, eps=self.bn.eps)


NUM_FEATURES = 128


def get_inputs():
    x = torch.rand(16, 128, 512) * 4 - 2
    return [x]


def get_init_inputs():
    return [NUM_FEATURES]
