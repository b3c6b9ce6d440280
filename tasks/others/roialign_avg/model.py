"""others / roialign_avg: ONNX RoiAlign (opset 20).

RoIAlign (average mode, half_pixel coordinates) of 64 fixed boxes on a [2, 128, 64, 64] feature map
with spatial_scale 0.25, 7x7 output bins and 2x2 bilinear samples per bin.
"""

import torch
from torch import nn


def _interp_axis(coords: torch.Tensor, size: int):
    """Bilinear neighbours and weights along one axis, as ONNX RoiAlign samples (zero outside [-1, size])."""
    valid = ((coords >= -1.0) & (coords <= size)).to(coords.dtype)
    c = coords.clamp(min=0.0)
    lo = c.floor().long()
    at_end = lo >= size - 1
    lo = torch.where(at_end, torch.full_like(lo, size - 1), lo)
    hi = torch.where(at_end, lo, lo + 1)
    c = torch.where(at_end, lo.to(c.dtype), c)
    frac = c - lo.to(c.dtype)
    return lo, hi, (1.0 - frac) * valid, frac * valid


class Model(nn.Module):
    """RoIAlign (average mode, half_pixel coordinates) of 64 fixed boxes on a [2, 128, 64, 64] feature map
    with spatial_scale 0.25, 7x7 output bins and 2x2 bilinear samples per bin.

    Constant tensors of model.onnx (a parameter or buffer of the same name takes its value):
        rois: float32 [64, 4], boxes (x1, y1, x2, y2) in input-image coordinates
        batch_indices: int64 [64], image index of each box
    """

    def __init__(self, output_height=7, output_width=7, sampling_ratio=2, spatial_scale=0.25):
        super().__init__()
        self.output_height = output_height
        self.output_width = output_width
        self.sampling_ratio = sampling_ratio
        self.spatial_scale = spatial_scale
        self.register_buffer("rois", torch.zeros(64, 4))
        self.register_buffer("batch_indices", torch.zeros(64, dtype=torch.int64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: float32 tensor of shape [2, 128, 64, 64], uniform in [-1, 1)
        Returns:
            y: float32 tensor of shape [64, 128, 7, 7]
        """
        height, width = x.shape[2], x.shape[3]
        g = self.sampling_ratio
        out = []
        for n in range(self.rois.shape[0]):
            x1, y1, x2, y2 = (self.rois[n] * self.spatial_scale - 0.5).tolist()  # half_pixel
            bin_h = (y2 - y1) / self.output_height
            bin_w = (x2 - x1) / self.output_width
            ys = y1 + (torch.arange(self.output_height * g, dtype=x.dtype) + 0.5) * (bin_h / g)
            xs = x1 + (torch.arange(self.output_width * g, dtype=x.dtype) + 0.5) * (bin_w / g)
            y_lo, y_hi, wy_lo, wy_hi = _interp_axis(ys, height)
            x_lo, x_hi, wx_lo, wx_hi = _interp_axis(xs, width)
            feat = x[int(self.batch_indices[n])]  # [C, H, W]
            rows = feat[:, y_lo, :] * wy_lo[None, :, None] + feat[:, y_hi, :] * wy_hi[None, :, None]
            vals = rows[:, :, x_lo] * wx_lo[None, None, :] + rows[:, :, x_hi] * wx_hi[None, None, :]
            c = vals.shape[0]
            vals = vals.reshape(c, self.output_height, g, self.output_width, g).mean(dim=(2, 4))
            out.append(vals)
        return torch.stack(out)


OUTPUT_HEIGHT = 7
OUTPUT_WIDTH = 7
SAMPLING_RATIO = 2
SPATIAL_SCALE = 0.25


def get_inputs():
    x = torch.rand(2, 128, 64, 64) * 2.0 - 1.0
    return [x]


def get_init_inputs():
    return [OUTPUT_HEIGHT, OUTPUT_WIDTH, SAMPLING_RATIO, SPATIAL_SCALE]
