"""matrix / gemm_linear: ONNX Gemm (opset 20).

Fully connected layer y = a @ fc.weight^T + fc.bias (ONNX Gemm with transB=1).
"""

import torch
from torch import nn


class Model(nn.Module):
    """Fully connected layer y = a @ fc.weight^T + fc.bias (ONNX Gemm with transB=1).

    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):
        fc.weight: float32 [512, 512], weight [out, in]
        fc.bias: float32 [512], bias [out]
    """

    def __init__(self, in_features=512, out_features=512):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        """
        Args:
            a: float32 tensor of shape [256, 512], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [256, 512]
        """
        return self.fc(a)


IN_FEATURES = 512
OUT_FEATURES = 512


def get_inputs():
    a = torch.rand(256, 512) * 2.0 - 1.0
    return [a]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
