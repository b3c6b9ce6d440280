"""Sliding-window categories: pooling, convolution (as data)."""

from __future__ import annotations

import math

from kit.suite.spec import Const, In, Out, TaskDef, uniform_const

_DIM = {3: "1d", 4: "2d", 5: "3d"}


# ------------------------------------------------------------------------------------------ pooling
def _pool(tid, op, shape, k, s=None, p=None, ceil=False, include_pad=None, summary=""):
    nd = len(shape) - 2
    s = s or k
    p = p or [0] * nd
    attrs = {"kernel_shape": list(k), "strides": list(s), "pads": list(p) + list(p)}
    if ceil:
        attrs["ceil_mode"] = 1
    fn = "max" if op == "MaxPool" else "avg"
    extra = ""
    if op == "AveragePool":
        attrs["count_include_pad"] = 1 if include_pad else 0
        extra = f", count_include_pad={bool(include_pad)}"
    args = f"kernel_size={tuple(k)}, stride={tuple(s)}, padding={tuple(p)}, ceil_mode={ceil}{extra}"
    return TaskDef(
        id=tid, category="pooling", op=op,
        summary=summary or f"{nd}-D {'max' if fn == 'max' else 'average'} pooling, kernel {list(k)}, stride "
                           f"{list(s)}, padding {list(p)}{', ceil_mode' if ceil else ''}"
                           f"{'' if include_pad is None else (', padding counted in the average' if include_pad else ', padding excluded from the average')}.",
        inputs=[In("x", shape, dist="normal", low=0.0, high=1.0)], outputs=[Out("y")], attrs=attrs,
        forward=f"return F.{fn}_pool{nd}d(x, {args})",
    )


def _global(tid, op, shape):
    dims = tuple(range(2, len(shape)))
    fn = "torch.mean" if op == "GlobalAveragePool" else "torch.amax"
    word = "average" if op == "GlobalAveragePool" else "max"
    return TaskDef(
        id=tid, category="pooling", op=op,
        summary=f"Global {word} pooling of a {len(shape)}-D tensor over all spatial dims (kept as size 1).",
        inputs=[In("x", shape, dist="normal", low=0.0, high=1.0)], outputs=[Out("y")],
        forward=f"return {fn}(x, dim={dims}, keepdim=True)",
    )


def pooling() -> list[TaskDef]:
    return [
        _pool("maxpool2d_k2s2", "MaxPool", (4, 64, 56, 56), (2, 2)),
        _pool("maxpool2d_k3s2p1", "MaxPool", (2, 64, 112, 112), (3, 3), (2, 2), (1, 1)),
        _pool("maxpool2d_k3s1p1", "MaxPool", (4, 64, 56, 56), (3, 3), (1, 1), (1, 1)),
        _pool("maxpool1d_k3s2_ceil", "MaxPool", (16, 64, 1022), (3,), (2,), ceil=True),
        _pool("maxpool3d_k2s2", "MaxPool", (2, 32, 16, 32, 32), (2, 2, 2)),
        _pool("avgpool2d_k2s2", "AveragePool", (4, 64, 56, 56), (2, 2), include_pad=False),
        _pool("avgpool2d_k3s1p1_exclude_pad", "AveragePool", (4, 64, 56, 56), (3, 3), (1, 1), (1, 1),
              include_pad=False),
        _pool("avgpool2d_k3s2p1_include_pad", "AveragePool", (8, 64, 56, 56), (3, 3), (2, 2), (1, 1),
              include_pad=True),
        _pool("avgpool1d_k4s2", "AveragePool", (8, 64, 1024), (4,), (2,), include_pad=False),
        _pool("avgpool3d_k2s2", "AveragePool", (2, 32, 16, 32, 32), (2, 2, 2), include_pad=False),
        _global("global_avgpool_4d", "GlobalAveragePool", (8, 256, 28, 28)),
        _global("global_avgpool_3d", "GlobalAveragePool", (16, 256, 256)),
        _global("global_avgpool_5d", "GlobalAveragePool", (2, 64, 8, 32, 32)),
        _global("global_maxpool_4d", "GlobalMaxPool", (8, 256, 28, 28)),
        _global("global_maxpool_3d", "GlobalMaxPool", (32, 256, 256)),
    ]


# ------------------------------------------------------------------------------------------ convolution
def _conv(tid, x, cout, k, s=None, p=None, d=None, g=1, bias=True, transpose=False, out_pad=None,
          asym_pads=None, summary=""):
    nd = len(x) - 2
    cin = x[1]
    s = list(s or [1] * nd)
    d = list(d or [1] * nd)
    p = list(p or [0] * nd)
    k = list(k)
    if transpose:
        wshape = (cin, cout // g, *k)
        fan_in = (cin // g) * math.prod(k)
    else:
        wshape = (cout, cin // g, *k)
        fan_in = (cin // g) * math.prod(k)
    bound = math.sqrt(3.0 / fan_in)
    consts = [Const("conv.weight", uniform_const(f"{tid}/w", wshape, bound), "convolution weight")]
    if bias:
        consts.append(Const("conv.bias", uniform_const(f"{tid}/b", (cout,), 0.5), "bias per output channel"))
    attrs = {"kernel_shape": k, "strides": s, "dilations": d, "group": g}
    if asym_pads is not None:
        attrs["pads"] = list(asym_pads)
        torch_pad = [0] * nd
    else:
        attrs["pads"] = p + p
        torch_pad = p
    cls = ("ConvTranspose" if transpose else "Conv") + _DIM[len(x)]
    if transpose and out_pad:
        attrs["output_padding"] = list(out_pad)
    init_args = [("in_channels", cin), ("out_channels", cout), ("kernel_size", tuple(k)), ("stride", tuple(s)),
                 ("padding", tuple(torch_pad)), ("dilation", tuple(d)), ("groups", g), ("bias", bias)]
    extra_arg = ""
    if transpose and out_pad:
        init_args.insert(5, ("output_padding", tuple(out_pad)))
        extra_arg = ", output_padding=output_padding"
    init = (f"self.conv = nn.{cls}(in_channels, out_channels, kernel_size, stride=stride, padding=padding"
            f"{extra_arg}, dilation=dilation, groups=groups, bias=bias)")
    if asym_pads is not None:
        # ONNX pads [x1_begin, x2_begin, ..., x1_end, x2_end, ...]; F.pad takes the last dim first
        begins, ends = asym_pads[:nd], asym_pads[nd:]
        fpad = []
        for i in reversed(range(nd)):
            fpad += [begins[i], ends[i]]
        forward = f"return self.conv(F.pad(x, {tuple(fpad)}))"
    else:
        forward = "return self.conv(x)"
    kind = "transposed convolution" if transpose else "convolution"
    desc = summary or (
        f"{nd}-D {kind}: {cin} -> {cout} channels, kernel {k}, stride {s}, "
        f"padding {p if asym_pads is None else 'ONNX pads [h_begin, w_begin, h_end, w_end] = ' + str(list(asym_pads))}"
        f", dilation {d}, groups {g}"
        f"{', output_padding ' + str(list(out_pad)) if out_pad else ''}{'' if bias else ', no bias'}.")
    return TaskDef(
        id=tid, category="convolution", op="ConvTranspose" if transpose else "Conv", summary=desc,
        inputs=[In("x", x)], outputs=[Out("y")], consts=consts, attrs=attrs, init_code=init, forward=forward,
        init_args=init_args, atol=5e-3, rtol=1e-3, note=_CONV_TOL,
    )


_CONV_TOL = ("Tolerance atol=5e-3, rtol=1e-3: fast convolution algorithms (Winograd, Strassen, im2col+GEMM "
             "blocking) legitimately change float32 rounding; MNN's own kernels differ from ONNX Runtime by up to "
             "2.1e-3 on outputs of magnitude ~1")


def convolution() -> list[TaskDef]:
    return [
        _conv("conv2d_3x3", (1, 32, 56, 56), 32, (3, 3), p=(1, 1)),
        _conv("conv2d_1x1", (1, 64, 56, 56), 128, (1, 1)),
        _conv("conv2d_3x3_stride2", (1, 32, 112, 112), 64, (3, 3), s=(2, 2), p=(1, 1)),
        _conv("conv2d_5x5", (1, 16, 64, 64), 32, (5, 5), p=(2, 2)),
        _conv("conv2d_dilation2", (1, 32, 56, 56), 32, (3, 3), p=(2, 2), d=(2, 2)),
        _conv("conv2d_groups4", (1, 64, 56, 56), 64, (3, 3), p=(1, 1), g=4),
        _conv("conv2d_depthwise", (1, 128, 56, 56), 128, (3, 3), p=(1, 1), g=128),
        _conv("conv2d_no_bias_batch2", (2, 32, 32, 32), 64, (3, 3), bias=False),
        _conv("conv2d_1x7", (1, 32, 32, 32), 32, (1, 7), p=(0, 3)),
        _conv("conv2d_asym_pads", (1, 16, 60, 60), 32, (3, 3), asym_pads=(1, 0, 2, 1)),
        _conv("conv1d_k3", (4, 64, 1024), 64, (3,), p=(1,)),
        _conv("conv3d_k3", (1, 16, 16, 32, 32), 16, (3, 3, 3), p=(1, 1, 1)),
        _conv("conv2d_rect_stride12_batch8", (8, 16, 48, 80), 32, (3, 3), s=(1, 2), p=(1, 1)),
        _conv("convtranspose2d_k2s2", (1, 64, 32, 32), 32, (2, 2), s=(2, 2), transpose=True),
        _conv("convtranspose2d_k3s2_outpad", (1, 32, 32, 32), 16, (3, 3), s=(2, 2), p=(1, 1), transpose=True,
              out_pad=(1, 1)),
        _conv("convtranspose2d_k4s2p1", (1, 32, 28, 28), 32, (4, 4), s=(2, 2), p=(1, 1), transpose=True),
        _conv("convtranspose2d_k3s1p1", (1, 32, 56, 56), 32, (3, 3), p=(1, 1), transpose=True),
        _conv("convtranspose2d_groups2", (1, 32, 32, 32), 32, (4, 4), s=(2, 2), p=(1, 1), g=2, transpose=True),
        _conv("convtranspose2d_dilation2_no_bias", (1, 16, 32, 32), 16, (3, 3), d=(2, 2), bias=False,
              transpose=True),
        _conv("convtranspose1d_k4s2", (2, 64, 256), 32, (4,), s=(2,), p=(1,), transpose=True),
        _conv("convtranspose3d_k4s2", (1, 16, 8, 16, 16), 8, (4, 4, 4), s=(2, 2, 2), p=(1, 1, 1), transpose=True),
    ]


def all_defs() -> list[TaskDef]:
    return pooling() + convolution()
