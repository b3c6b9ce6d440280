"""Network-layer categories: normalization, matrix, others (as data; pooling and convolution are in
:mod:`kit.suite.defs_window`)."""

from __future__ import annotations

import math

import numpy as np

from kit.suite.spec import Const, In, Out, TaskDef, f32, i64, seeded_rng, uniform_const


# ------------------------------------------------------------------------------------------ normalization
def _bn(tid, shape):
    c = shape[1]
    nn_cls = {2: "BatchNorm1d", 3: "BatchNorm1d", 4: "BatchNorm2d", 5: "BatchNorm3d"}[len(shape)]
    consts = [
        Const("bn.weight", uniform_const(f"{tid}/scale", (c,), 1.5, 0.5), "scale (gamma)"),
        Const("bn.bias", uniform_const(f"{tid}/bias", (c,), 0.5), "shift (beta)"),
        Const("bn.running_mean", uniform_const(f"{tid}/mean", (c,), 0.5), "running mean"),
        Const("bn.running_var", uniform_const(f"{tid}/var", (c,), 2.0, 0.5), "running variance (positive)"),
    ]
    return TaskDef(
        id=tid, category="normalization", op="BatchNormalization",
        summary=f"Batch normalization in inference mode over channel axis 1 of a {len(shape)}-D tensor: "
                "y = (x - running_mean) / sqrt(running_var + eps) * weight + bias, eps = 1e-5.",
        inputs=[In("x", shape, low=-2, high=2)], outputs=[Out("y")], consts=consts,
        attrs={"epsilon": 1e-5},
        init_args=[("num_features", c)],
        init_code=f"self.bn = nn.{nn_cls}(num_features, eps=1e-5)",
        forward="return F.batch_norm(x, self.bn.running_mean, self.bn.running_var, self.bn.weight, self.bn.bias,\n"
                "                    training=False, eps=self.bn.eps)",
    )


def _ln(tid, shape, axis, eps=1e-5):
    norm_shape = tuple(shape[axis:])
    consts = [
        Const("ln.weight", uniform_const(f"{tid}/scale", norm_shape, 1.5, 0.5), "scale (gamma)"),
        Const("ln.bias", uniform_const(f"{tid}/bias", norm_shape, 0.5), "shift (beta)"),
    ]
    return TaskDef(
        id=tid, category="normalization", op="LayerNormalization",
        summary=f"Layer normalization over the trailing dims {list(norm_shape)} (ONNX axis={axis}), eps={eps:g}, "
                "with an element-wise affine transform.",
        inputs=[In("x", shape, low=-2, high=2)], outputs=[Out("y")], consts=consts,
        attrs={"axis": axis, "epsilon": eps},
        init_args=[("normalized_shape", list(norm_shape))],
        init_code=f"self.ln = nn.LayerNorm(normalized_shape, eps={eps!r})",
        forward="return self.ln(x)",
    )


def _in(tid, shape, eps=1e-5):
    c = shape[1]
    nn_cls = {3: "InstanceNorm1d", 4: "InstanceNorm2d", 5: "InstanceNorm3d"}[len(shape)]
    consts = [
        Const("inorm.weight", uniform_const(f"{tid}/scale", (c,), 1.5, 0.5), "per-channel scale"),
        Const("inorm.bias", uniform_const(f"{tid}/bias", (c,), 0.5), "per-channel shift"),
    ]
    return TaskDef(
        id=tid, category="normalization", op="InstanceNormalization",
        summary=f"Instance normalization of a {len(shape)}-D tensor (statistics per sample and channel over the "
                f"spatial dims), eps={eps:g}, with per-channel scale and shift.",
        inputs=[In("x", shape, low=-2, high=2)], outputs=[Out("y")], consts=consts,
        attrs={"epsilon": eps},
        init_args=[("num_features", c)],
        init_code=f"self.inorm = nn.{nn_cls}(num_features, eps={eps!r}, affine=True)",
        forward="return self.inorm(x)",
    )


def normalization() -> list[TaskDef]:
    return [
        _bn("batchnorm_2d", (2048, 256)),
        _bn("batchnorm_3d", (16, 128, 512)),
        _bn("batchnorm_4d", (4, 64, 56, 56)),
        _bn("batchnorm_5d", (2, 32, 16, 32, 32)),
        _ln("layernorm_last_3d", (16, 128, 512), -1),
        _ln("layernorm_last2_3d", (32, 64, 256), -2),
        _ln("layernorm_2d_eps1e6", (2048, 768), -1, eps=1e-6),
        _ln("layernorm_chw_4d", (8, 64, 32, 32), 1),
        _in("instancenorm_3d", (8, 64, 1024)),
        _in("instancenorm_4d", (4, 64, 56, 56)),
        _in("instancenorm_4d_eps1e3", (2, 32, 128, 128), eps=1e-3),
        _in("instancenorm_5d", (2, 16, 16, 32, 32)),
    ]


# ------------------------------------------------------------------------------------------ matrix
def _mm(tid, a, b, summary, **kw):
    return TaskDef(id=tid, category="matrix", op="MatMul", summary=summary,
                   inputs=[In("a", a), In("b", b)], outputs=[Out("y")], forward="return torch.matmul(a, b)", **kw)


def _einsum(tid, eq, shapes, summary):
    names = ["a", "b", "c"][: len(shapes)]
    return TaskDef(id=tid, category="matrix", op="Einsum", summary=summary,
                   inputs=[In(n, s) for n, s in zip(names, shapes)], outputs=[Out("y")],
                   attrs={"equation": eq}, forward=f"return torch.einsum({eq!r}, {', '.join(names)})")


_DET_TOL = ("Tolerance atol=rtol=1e-2: a determinant is the product of the LU pivots; pivoting order and "
            "float32 rounding differ per engine and near-singular matrices amplify them (MNN's kernel differs "
            "from ONNX Runtime by up to 4e-2 absolute on |det| ~ 1e2)")


def matrix() -> list[TaskDef]:
    long_k = "Long reductions (K >= 512) accumulate float32 rounding differently per engine: atol 1e-3."
    return [
        _mm("matmul_2d_square", (256, 512), (512, 256), "Matrix product of a [256, 512] and a [512, 256] matrix.",
            atol=1e-3, note=long_k),
        _mm("matmul_2d_rect", (512, 256), (256, 384), "Matrix product [512, 256] x [256, 384]."),
        _mm("matmul_batched_3d", (8, 128, 256), (8, 256, 128), "Batched matrix product over a batch of 8."),
        _mm("matmul_bcast_4d", (2, 4, 128, 64), (4, 64, 128),
            "Batched matrix product with numpy broadcasting of the batch dims ([2, 4] with [4])."),
        _mm("matmul_matvec", (1024, 1024), (1024,), "Matrix-vector product (1-D right operand).",
            atol=1e-3, note=long_k),
        _mm("matmul_vecmat", (1024,), (1024, 512), "Vector-matrix product (1-D left operand).",
            atol=1e-3, note=long_k),
        _mm("matmul_3d_by_2d", (8, 128, 256), (256, 128),
            "A batch of matrices times one shared matrix (the 2-D operand broadcasts over the batch)."),
        TaskDef(id="gemm_linear", category="matrix", op="Gemm",
                summary="Fully connected layer y = a @ fc.weight^T + fc.bias (ONNX Gemm with transB=1).",
                inputs=[In("a", (256, 512))], outputs=[Out("y")],
                consts=[Const("fc.weight", uniform_const("gemm_linear/w", (512, 512), 0.0765), "weight [out, in]"),
                        Const("fc.bias", uniform_const("gemm_linear/b", (512,), 0.5), "bias [out]")],
                attrs={"transB": 1}, init_args=[("in_features", 512), ("out_features", 512)],
                init_code="self.fc = nn.Linear(in_features, out_features)", forward="return self.fc(a)"),
        TaskDef(id="gemm_const_b", category="matrix", op="Gemm",
                summary="y = a @ weight + bias with a constant [K, N] weight (transB=0) and a bias row.",
                inputs=[In("a", (256, 512))], outputs=[Out("y")],
                consts=[Const("weight", uniform_const("gemm_const_b/w", (512, 384), 0.08), "weight [K, N]"),
                        Const("bias", uniform_const("gemm_const_b/b", (384,), 0.5), "bias [N]")],
                init_code="self.weight = nn.Parameter(torch.randn(512, 384) * 0.05)\n"
                          "self.bias = nn.Parameter(torch.zeros(384))",
                forward="return a @ self.weight + self.bias"),
        TaskDef(id="gemm_transa", category="matrix", op="Gemm",
                summary="y = a^T @ b with both operands as inputs (ONNX Gemm transA=1, no C).",
                inputs=[In("a", (512, 256)), In("b", (512, 384))], outputs=[Out("y")],
                attrs={"transA": 1}, forward="return a.t() @ b", atol=1e-3, note=long_k),
        TaskDef(id="gemm_alpha_beta", category="matrix", op="Gemm",
                summary="y = 0.5 * (a @ b) + 2.0 * c with a full [M, N] matrix c (alpha=0.5, beta=2.0).",
                inputs=[In("a", (256, 512)), In("b", (512, 256)), In("c", (256, 256))], outputs=[Out("y")],
                attrs={"alpha": 0.5, "beta": 2.0}, forward="return 0.5 * (a @ b) + 2.0 * c"),
        TaskDef(id="gemm_transab_alpha", category="matrix", op="Gemm",
                summary="y = 1.5 * a^T @ b^T (transA=1, transB=1, alpha=1.5, no C).",
                inputs=[In("a", (512, 256)), In("b", (384, 512))], outputs=[Out("y")],
                attrs={"transA": 1, "transB": 1, "alpha": 1.5}, forward="return 1.5 * (a.t() @ b.t())",
                atol=1e-3, note=long_k),
        TaskDef(id="gemm_scalar_bias", category="matrix", op="Gemm",
                summary="y = a @ weight + bias where bias is a single value broadcast to [M, N].",
                inputs=[In("a", (1024, 256))], outputs=[Out("y")],
                consts=[Const("weight", uniform_const("gemm_scalar_bias/w", (256, 256), 0.1), "weight [K, N]"),
                        Const("bias", f32([0.75]), "scalar bias, shape [1]")],
                init_code="self.weight = nn.Parameter(torch.randn(256, 256) * 0.05)\n"
                          "self.bias = nn.Parameter(torch.zeros(1))",
                forward="return a @ self.weight + self.bias"),
        _einsum("einsum_bmm", "bij,bjk->bik", [(8, 128, 256), (8, 256, 128)], "Batched matrix product by einsum."),
        _einsum("einsum_attention_scores", "bhqd,bhkd->bhqk", [(2, 8, 128, 64), (2, 8, 128, 64)],
                "Attention scores q @ k^T per batch and head (einsum bhqd,bhkd->bhqk)."),
        _einsum("einsum_abt", "ik,jk->ij", [(256, 256), (384, 256)], "Matrix product with a transposed operand "
                "(einsum ik,jk->ij)."),
        _einsum("einsum_rowdot", "bi,bi->b", [(2048, 512), (2048, 512)], "Row-wise dot products (einsum bi,bi->b)."),
        TaskDef(id="det_batch_8x8", category="matrix", op="Det",
                summary="Determinants of a batch of 8x8 matrices.",
                inputs=[In("x", (2048, 8, 8))], outputs=[Out("y")], forward="return torch.linalg.det(x)",
                atol=1e-2, rtol=1e-2, note=_DET_TOL),
        TaskDef(id="det_batch_12x12", category="matrix", op="Det",
                summary="Determinants of a batch of 12x12 matrices.",
                inputs=[In("x", (1024, 12, 12))], outputs=[Out("y")], forward="return torch.linalg.det(x)",
                atol=1e-2, rtol=1e-2, note=_DET_TOL),
    ]


# ------------------------------------------------------------------------------------------ others
_RNN_FWD = """\
hidden = self.W.shape[1]
w, r = self.W[0], self.R[0]
bias = self.B[0, :hidden] + self.B[0, hidden:]
h = torch.zeros(x.shape[1], hidden, dtype=x.dtype)
ys = []
for t in range(x.shape[0]):
    h = torch.tanh(x[t] @ w.t() + h @ r.t() + bias)
    ys.append(h)
return torch.stack(ys).unsqueeze(1), h.unsqueeze(0)"""

_LSTM_FWD = """\
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
return torch.stack(ys).unsqueeze(1), h.unsqueeze(0), c.unsqueeze(0)"""

_STFT_FWD = """\
spec = torch.stft(signal[..., 0], n_fft=self.window.shape[0], hop_length=self.frame_step,
                  win_length=self.window.shape[0], window=self.window, center=False, onesided=True,
                  return_complex=True)  # [batch, bins, frames]
return torch.view_as_real(spec.transpose(1, 2)).contiguous()"""

_ROI_FWD = """\
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
return torch.stack(out)"""

_ROI_HELPER = '''

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
'''


def others() -> list[TaskDef]:
    hid, inp, seq, batch = 128, 128, 64, 16
    b = 1.0 / math.sqrt(hid)
    rnn = TaskDef(
        id="rnn_tanh_forward", category="others", op="RNN",
        summary=f"Single-layer forward Elman RNN with tanh, hidden size {hid}, zero initial state: "
                "h_t = tanh(x_t W^T + h_(t-1) R^T + Wb + Rb). Returns every h_t and the last one.",
        inputs=[In("x", (seq, batch, inp))], outputs=[Out("y"), Out("y_h")],
        consts=[Const("W", uniform_const("rnn/W", (1, hid, inp), b), "input weights [1, hidden, input]"),
                Const("R", uniform_const("rnn/R", (1, hid, hid), b), "recurrent weights [1, hidden, hidden]"),
                Const("B", uniform_const("rnn/B", (1, 2 * hid), b), "biases [1, 2*hidden] = [Wb, Rb]")],
        attrs={"hidden_size": hid},
        init_args=[("input_size", inp), ("hidden_size", hid)],
        init_code="self.W = nn.Parameter(torch.randn(1, hidden_size, input_size) * 0.05)\n"
                  "self.R = nn.Parameter(torch.randn(1, hidden_size, hidden_size) * 0.05)\n"
                  "self.B = nn.Parameter(torch.zeros(1, 2 * hidden_size))",
        forward=_RNN_FWD,
        note="Recurrence over 64 steps accumulates rounding: atol 1e-4 is kept (tanh bounds the state).",
    )
    lh, lseq = 128, 32
    lb = 1.0 / math.sqrt(lh)
    lstm = TaskDef(
        id="lstm_forward", category="others", op="LSTM",
        summary=f"Single-layer forward LSTM, hidden size {lh}, zero initial states, ONNX gate order i, o, f, c; "
                "returns every h_t, the last h and the last cell state.",
        inputs=[In("x", (lseq, batch, inp))], outputs=[Out("y"), Out("y_h"), Out("y_c")],
        consts=[Const("W", uniform_const("lstm/W", (1, 4 * lh, inp), lb), "input weights [1, 4*hidden, input]"),
                Const("R", uniform_const("lstm/R", (1, 4 * lh, lh), lb), "recurrent weights [1, 4*hidden, hidden]"),
                Const("B", uniform_const("lstm/B", (1, 8 * lh), lb), "biases [1, 8*hidden] = [Wb, Rb]")],
        attrs={"hidden_size": lh},
        init_args=[("input_size", inp), ("hidden_size", lh)],
        init_code="self.W = nn.Parameter(torch.randn(1, 4 * hidden_size, input_size) * 0.05)\n"
                  "self.R = nn.Parameter(torch.randn(1, 4 * hidden_size, hidden_size) * 0.05)\n"
                  "self.B = nn.Parameter(torch.zeros(1, 8 * hidden_size))",
        forward=_LSTM_FWD,
    )
    n_fft, hop = 512, 128
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)).astype(np.float32)
    stft = TaskDef(
        id="stft_hann_onesided", category="others", op="STFT",
        summary=f"Short-time Fourier transform of real signals: frame length {n_fft} with a periodic Hann window, "
                f"hop {hop}, no centering/padding, one-sided spectrum as [batch, frames, bins, (re, im)].",
        inputs=[In("signal", (2, 16000, 1))], outputs=[Out("y")],
        consts=[Const("frame_step", i64(hop), "hop length (scalar int64)"),
                Const("window", window, "periodic Hann window")],
        node_inputs=["signal", "frame_step", "window"],
        attrs={"onesided": 1},
        init_args=[("frame_step", hop), ("n_fft", n_fft)],
        init_code="self.register_buffer(\"window\", torch.hann_window(n_fft, periodic=True))",
        forward=_STFT_FWD,
        atol=1e-3,
        note="Each bin sums 512 products (magnitudes up to ~40): atol 1e-3.",
    )
    rng = seeded_rng("roialign/rois")
    n_rois = 64
    x1 = rng.uniform(0, 190, n_rois)
    y1 = rng.uniform(0, 190, n_rois)
    w = rng.uniform(16, 64, n_rois)
    h = rng.uniform(16, 64, n_rois)
    rois = np.stack([x1, y1, np.minimum(x1 + w, 255), np.minimum(y1 + h, 255)], axis=1).astype(np.float32)
    bidx = i64(rng.integers(0, 2, n_rois))
    roi = TaskDef(
        id="roialign_avg", category="others", op="RoiAlign",
        summary="RoIAlign (average mode, half_pixel coordinates) of 64 fixed boxes on a [2, 128, 64, 64] feature "
                "map with spatial_scale 0.25, 7x7 output bins and 2x2 bilinear samples per bin.",
        inputs=[In("x", (2, 128, 64, 64))], outputs=[Out("y")],
        consts=[Const("rois", rois, "boxes (x1, y1, x2, y2) in input-image coordinates"),
                Const("batch_indices", bidx, "image index of each box")],
        attrs={"mode": "avg", "output_height": 7, "output_width": 7, "sampling_ratio": 2,
               "spatial_scale": 0.25, "coordinate_transformation_mode": "half_pixel"},
        init_args=[("output_height", 7), ("output_width", 7), ("sampling_ratio", 2), ("spatial_scale", 0.25)],
        init_code=f"self.register_buffer(\"rois\", torch.zeros({n_rois}, 4))\n"
                  f"self.register_buffer(\"batch_indices\", torch.zeros({n_rois}, dtype=torch.int64))",
        forward=_ROI_FWD,
        extra_code=_ROI_HELPER,
    )
    return [rnn, lstm, stft, roi]


def all_defs() -> list[TaskDef]:
    return normalization() + matrix() + others()
