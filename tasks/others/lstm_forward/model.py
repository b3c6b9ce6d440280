"""others / lstm_forward: ONNX LSTM (opset 20).

Single-layer forward LSTM, hidden size 128, zero initial states, ONNX gate order i, o, f, c; returns
every h_t, the last h and the last cell state.
"""

import torch
from torch import nn


class Model(nn.Module):
    """Single-layer forward LSTM, hidden size 128, zero initial states, ONNX gate order i, o, f, c; returns
    every h_t, the last h and the last cell state.

    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):
        W: float32 [1, 512, 128], input weights [1, 4*hidden, input]
        R: float32 [1, 512, 128], recurrent weights [1, 4*hidden, hidden]
        B: float32 [1, 1024], biases [1, 8*hidden] = [Wb, Rb]
    """

    def __init__(self, input_size=128, hidden_size=128):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.W = nn.Parameter(torch.randn(1, 4 * hidden_size, input_size) * 0.05)
        self.R = nn.Parameter(torch.randn(1, 4 * hidden_size, hidden_size) * 0.05)
        self.B = nn.Parameter(torch.zeros(1, 8 * hidden_size))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """
        Args:
            x: float32 tensor of shape [32, 16, 128], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [32, 1, 16, 128]
            y_h: float32 tensor of shape [1, 16, 128]
            y_c: float32 tensor of shape [1, 16, 128]
        """
        hidden = self.R.shape[2]
        w, r = self.W[0], self.R[0]
        bias = self.B[0, : 4 * hidden] + self.B[0, 4 * hidden :]
        h = torch.zeros(x.shape[1], hidden, dtype=x.dtype)
        c = torch.zeros(x.shape[1], hidden, dtype=x.dtype)
        ys = []
        for t in range(x.shape[0]):
            gates = x[t] @ w.t() + h @ r.t() + bias
            i, o, f, g = gates.chunk(4, dim=1)  # ONNX gate order: input, output, forget, cell
            i, o, f, g = torch.sigmoid(i), torch.sigmoid(o), torch.sigmoid(f), torch.tanh(g)
            c = f * c + i * g
            h = o * torch.tanh(c)
            ys.append(h)
        return torch.stack(ys).unsqueeze(1), h.unsqueeze(0), c.unsqueeze(0)


INPUT_SIZE = 128
HIDDEN_SIZE = 128


def get_inputs():
    x = torch.rand(32, 16, 128) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return [INPUT_SIZE, HIDDEN_SIZE]
