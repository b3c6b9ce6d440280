"""others / rnn_tanh_forward: ONNX RNN (opset 20).

Single-layer forward Elman RNN with tanh, hidden size 128, zero initial state: h_t = tanh(x_t W^T +
h_(t-1) R^T + Wb + Rb). Returns every h_t and the last one.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Single-layer forward Elman RNN with tanh, hidden size 128, zero initial state: h_t = tanh(x_t W^T +
    h_(t-1) R^T + Wb + Rb). Returns every h_t and the last one.

    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):
        W: float32 [1, 128, 128], input weights [1, hidden, input]
        R: float32 [1, 128, 128], recurrent weights [1, hidden, hidden]
        B: float32 [1, 256], biases [1, 2*hidden] = [Wb, Rb]
    """

    def __init__(self, input_size=128, hidden_size=128):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.W = nn.Parameter(torch.randn(1, hidden_size, input_size) * 0.05)
        self.R = nn.Parameter(torch.randn(1, hidden_size, hidden_size) * 0.05)
        self.B = nn.Parameter(torch.zeros(1, 2 * hidden_size))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """
        Args:
            x: float32 tensor of shape [64, 16, 128], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [64, 1, 16, 128]
            y_h: float32 tensor of shape [1, 16, 128]
        """
        hidden = self.W.shape[1]
        w, r = self.W[0], self.R[0]
        bias = self.B[0, :hidden] + self.B[0, hidden:]
        h = torch.zeros(x.shape[1], hidden, dtype=x.dtype)
        ys = []
        for t in range(x.shape[0]):
            h = torch.tanh(x[t] @ w.t() + h @ r.t() + bias)
            ys.append(h)
        return torch.stack(ys).unsqueeze(1), h.unsqueeze(0)


INPUT_SIZE = 128
HIDDEN_SIZE = 128


def get_inputs():
    x = torch.rand(64, 16, 128) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return [INPUT_SIZE, HIDDEN_SIZE]
