"""others / stft_hann_onesided: ONNX STFT (opset 20).

Short-time Fourier transform of real signals: frame length 512 with a periodic Hann window, hop 128,
no centering/padding, one-sided spectrum as [batch, frames, bins, (re, im)].
"""

import torch
from torch import nn


class Model(nn.Module):
    """Short-time Fourier transform of real signals: frame length 512 with a periodic Hann window, hop 128,
    no centering/padding, one-sided spectrum as [batch, frames, bins, (re, im)].

    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):
        frame_step: int64 [], hop length (scalar int64)
        window: float32 [512], periodic Hann window
    """

    def __init__(self, frame_step=128, n_fft=512):
        super().__init__()
        self.frame_step = frame_step
        self.n_fft = n_fft
        self.register_buffer("window", torch.hann_window(n_fft, periodic=True))

    def forward(self, signal: torch.Tensor) -> torch.Tensor:
        """
        Args:
            signal: float32 tensor of shape [2, 16000, 1], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [2, 122, 257, 2]
        """
        spec = torch.stft(signal[..., 0], n_fft=self.window.shape[0], hop_length=self.frame_step,
                          win_length=self.window.shape[0], window=self.window, center=False, onesided=True,
                          return_complex=True)  # [batch, bins, frames]
        return torch.view_as_real(spec.transpose(1, 2)).contiguous()


FRAME_STEP = 128
N_FFT = 512


def get_inputs():
    signal = torch.rand(2, 16000, 1) * 2.0 - 1.0
    return [signal]


def get_init_inputs():
    return [FRAME_STEP, N_FFT]
