"""Reduction and tensor (data movement, indexing) categories (as data)."""

from __future__ import annotations

import numpy as np

from kit.suite.spec import Const, In, Out, TaskDef, f32, i64

_LONG = "Sums of {n} terms accumulate float32 rounding differently per engine: atol {atol:g}."

_RED = {
    # op: (torch expression template with {x} {dim} {kd}, word)
    "ReduceSum": ("torch.sum(x, dim={dim}, keepdim={kd})", "Sum"),
    "ReduceMean": ("torch.mean(x, dim={dim}, keepdim={kd})", "Mean"),
    "ReduceMax": ("torch.amax(x, dim={dim}, keepdim={kd})", "Maximum"),
    "ReduceMin": ("torch.amin(x, dim={dim}, keepdim={kd})", "Minimum"),
    "ReduceProd": ("torch.prod(x, dim={dim}, keepdim={kd})", "Product"),
    "ReduceL2": ("torch.linalg.vector_norm(x, ord=2, dim={dim}, keepdim={kd})", "L2 norm"),
    "ReduceSumSquare": ("torch.sum(x * x, dim={dim}, keepdim={kd})", "Sum of squares"),
    "ReduceLogSumExp": ("torch.logsumexp(x, dim={dim}, keepdim={kd})", "Log-sum-exp"),
}


def _reduce(tid, op, shape, axes, keepdims, dist="uniform", low=-1.0, high=1.0, atol=1e-4, rtol=1e-4, note=""):
    rank = len(shape)
    tmpl, word = _RED[op]
    if axes is None:
        dim = tuple(range(rank))
        consts, node_inputs = [], ["x"]
        where = "all axes (no axes input)"
    else:
        dim = tuple(axes) if len(axes) > 1 else axes[0]
        consts = [Const("axes", i64(axes))]
        node_inputs = ["x", "axes"]
        where = f"axes {list(axes)}"
    n = int(np.prod([shape[a] for a in (range(rank) if axes is None else axes)]))
    if atol > 1e-4 and not note:
        note = _LONG.format(n=n, atol=atol)
    expr = tmpl.format(dim=dim, kd=bool(keepdims))
    if op == "ReduceProd" and isinstance(dim, tuple):
        raise ValueError("ReduceProd tasks reduce a single axis")
    return TaskDef(
        id=tid, category="reduction", op=op,
        summary=f"{word} over {where} of a {rank}-D tensor, keepdims={int(keepdims)}.",
        inputs=[In("x", shape, dist=dist, low=low, high=high)], outputs=[Out("y")],
        consts=consts, node_inputs=node_inputs, attrs={"keepdims": int(keepdims)},
        forward=f"return {expr}", atol=atol, rtol=rtol, note=note,
    )


def _arg(tid, op, shape, axis, keepdims):
    fn = "argmax" if op == "ArgMax" else "argmin"
    return TaskDef(
        id=tid, category="reduction", op=op,
        summary=f"Index of the {'largest' if fn == 'argmax' else 'smallest'} element along axis {axis} "
                f"(int64), keepdims={int(keepdims)}.",
        inputs=[In("x", shape, dist="normal", low=0.0, high=1.0)], outputs=[Out("y", "int64")],
        attrs={"axis": axis, "keepdims": int(keepdims)},
        forward=f"return torch.{fn}(x, dim={axis}, keepdim={bool(keepdims)})",
    )


def reduction() -> list[TaskDef]:
    nrm = {"dist": "normal", "low": 0.0, "high": 1.0}
    prod = {"dist": "normal", "low": 1.0, "high": 0.25}
    return [
        _reduce("reduce_sum_axis1_keep_3d", "ReduceSum", (32, 512, 64), [1], 1, atol=1e-3),
        _reduce("reduce_sum_last_2d", "ReduceSum", (1024, 1024), [-1], 0, atol=1e-3),
        _reduce("reduce_sum_hw_4d", "ReduceSum", (4, 64, 56, 56), [2, 3], 1, atol=1e-3),
        _reduce("reduce_sum_all", "ReduceSum", (256, 4096), None, 0, atol=1e-2),
        _reduce("reduce_sum_axes13_5d", "ReduceSum", (2, 16, 16, 32, 32), [1, 3], 0, atol=1e-3),
        _reduce("reduce_mean_last_keep_3d", "ReduceMean", (64, 256, 64), [-1], 1),
        _reduce("reduce_mean_hw_4d", "ReduceMean", (4, 64, 56, 56), [2, 3], 0),
        _reduce("reduce_mean_axis0_2d", "ReduceMean", (4096, 256), [0], 1),
        _reduce("reduce_mean_all_keep_3d", "ReduceMean", (64, 128, 128), None, 1),
        _reduce("reduce_max_axis1_3d", "ReduceMax", (32, 512, 64), [1], 0, **nrm),
        _reduce("reduce_max_last_keep_2d", "ReduceMax", (1024, 1024), [-1], 1, **nrm),
        _reduce("reduce_max_hw_4d", "ReduceMax", (8, 64, 56, 56), [2, 3], 1, **nrm),
        _reduce("reduce_max_axes024_5d", "ReduceMax", (4, 16, 16, 32, 32), [0, 2, 4], 0, **nrm),
        _reduce("reduce_min_axis0_2d", "ReduceMin", (4096, 256), [0], 0, **nrm),
        _reduce("reduce_min_last_keep_4d", "ReduceMin", (8, 64, 56, 56), [-1], 1, **nrm),
        _reduce("reduce_min_axes02_3d", "ReduceMin", (64, 128, 128), [0, 2], 0, **nrm),
        _reduce("reduce_prod_last_2d", "ReduceProd", (32768, 32), [-1], 0, **prod),
        _reduce("reduce_prod_axis1_3d", "ReduceProd", (64, 16, 1024), [1], 0, **prod),
        _reduce("reduce_prod_axis0_keep_3d", "ReduceProd", (8, 256, 512), [0], 1, **prod),
        _reduce("reduce_l2_last_2d", "ReduceL2", (1024, 1024), [-1], 0),
        _reduce("reduce_l2_axis1_keep_4d", "ReduceL2", (4, 64, 56, 56), [1], 1),
        _reduce("reduce_l2_axes12_3d", "ReduceL2", (64, 128, 128), [1, 2], 0),
        _reduce("reduce_sum_square_last_2d", "ReduceSumSquare", (1024, 1024), [-1], 0, atol=1e-3),
        _reduce("reduce_sum_square_hw_keep_4d", "ReduceSumSquare", (4, 64, 56, 56), [2, 3], 1, atol=1e-3),
        _reduce("reduce_sum_square_axis0_3d", "ReduceSumSquare", (64, 128, 128), [0], 0),
        _reduce("reduce_logsumexp_last_2d", "ReduceLogSumExp", (1024, 1024), [-1], 0, low=-4.0, high=4.0),
        _reduce("reduce_logsumexp_axis1_keep_4d", "ReduceLogSumExp", (4, 64, 56, 56), [1], 1, low=-4.0, high=4.0),
        _reduce("reduce_logsumexp_axes01_3d", "ReduceLogSumExp", (64, 128, 128), [0, 1], 0, low=-4.0, high=4.0),
        _arg("argmax_last_2d", "ArgMax", (1024, 1000), -1, 0),
        _arg("argmax_axis1_keep_4d", "ArgMax", (4, 64, 56, 56), 1, 1),
        _arg("argmax_axis0_3d", "ArgMax", (32, 128, 128), 0, 0),
        _arg("argmax_axis2_keep_3d", "ArgMax", (64, 128, 256), 2, 1),
        _arg("argmin_last_2d", "ArgMin", (1024, 1000), -1, 0),
        _arg("argmin_axis1_4d", "ArgMin", (4, 64, 56, 56), 1, 0),
        _arg("argmin_axis0_keep_3d", "ArgMin", (32, 128, 128), 0, 1),
    ]


def _t(tid, op, summary, inputs, forward, outputs=None, **kw):
    return TaskDef(id=tid, category="tensor", op=op, summary=summary, inputs=inputs,
                   outputs=outputs or [Out("y")], forward=forward, **kw)


def tensor() -> list[TaskDef]:
    x4 = (4, 64, 56, 56)
    n_upd = 256
    scatter_rows = (np.arange(n_upd) * 37 + 5) % 1024
    return [
        _t("reshape_4d_to_3d", "Reshape", "Reshape an NCHW tensor [4, 64, 56, 56] to [4, 64, 3136] (row-major).",
           [In("x", x4)], "return torch.reshape(x, tuple(self.shape))",
           consts=[Const("shape", i64([4, 64, 3136]), "target shape")], init_args=[("shape", [4, 64, 3136])]),
        _t("transpose_nchw_to_nhwc", "Transpose", "Permute an NCHW tensor to NHWC (perm [0, 2, 3, 1]).",
           [In("x", x4)], "return x.permute(0, 2, 3, 1)", attrs={"perm": [0, 2, 3, 1]}),
        _t("transpose_3d_201", "Transpose", "Permute a 3-D tensor with perm [2, 0, 1].",
           [In("x", (512, 64, 32))], "return x.permute(2, 0, 1)", attrs={"perm": [2, 0, 1]}),
        _t("concat_3way_axis1_4d", "Concat", "Concatenate three NCHW tensors along the channel axis.",
           [In("a", (4, 32, 56, 56)), In("b", (4, 16, 56, 56)), In("c", (4, 48, 56, 56))],
           "return torch.cat([a, b, c], dim=1)", attrs={"axis": 1}),
        _t("concat_last_3d", "Concat", "Concatenate two 3-D tensors along the last axis (axis=-1).",
           [In("a", (64, 256, 40)), In("b", (64, 256, 24))], "return torch.cat([a, b], dim=-1)", attrs={"axis": -1}),
        _t("slice_crop_4d", "Slice", "Crop a window x[:, :, 4:52, 8:-8] of an NCHW tensor (axes [2, 3], step 1).",
           [In("x", x4)], "return x[:, :, 4:52, 8:-8]",
           consts=[Const("starts", i64([4, 8])), Const("ends", i64([52, -8])), Const("axes", i64([2, 3]))],
           node_inputs=["x", "starts", "ends", "axes"]),
        _t("slice_reverse_step2_3d", "Slice",
           "Slice with steps: axis 1 reversed taking every second element from the end (step -2), axis 2 "
           "elements 0..63 with step 2.",
           [In("x", (64, 256, 128))], "return torch.flip(x, dims=[1])[:, ::2, 0:64:2]",
           consts=[Const("starts", i64([-1, 0])), Const("ends", i64([-(2**63), 64])), Const("axes", i64([1, 2])),
                   Const("steps", i64([-2, 2]))],
           node_inputs=["x", "starts", "ends", "axes", "steps"]),
        _t("gather_embedding", "Gather", "Embedding lookup: rows of a [8192, 256] table selected by int64 indices "
           "of shape [64, 128] (Gather axis 0).",
           [In("table", (8192, 256)), In("indices", (64, 128), dtype="int64", dist="integers", low=0, high=8191)],
           "return table[indices]", attrs={"axis": 0}),
        _t("gather_axis1_3d", "Gather", "Select 256 of the 1024 positions of axis 1 with a 1-D int64 index vector "
           "(Gather axis 1, repeated indices allowed).",
           [In("x", (16, 1024, 64)), In("indices", (256,), dtype="int64", dist="integers", low=0, high=1023)],
           "return torch.index_select(x, 1, indices)", attrs={"axis": 1}),
        _t("tile_2d", "Tile", "Repeat a [128, 256] matrix 4 times along both axes.",
           [In("x", (128, 256))], "return x.repeat(4, 4)", consts=[Const("repeats", i64([4, 4]))]),
        _t("tile_4d", "Tile", "Tile an NCHW tensor with repeats [2, 1, 2, 3].",
           [In("x", (2, 32, 32, 32))], "return x.repeat(2, 1, 2, 3)", consts=[Const("repeats", i64([2, 1, 2, 3]))]),
        _t("expand_4d", "Expand", "Broadcast a [1, 64, 1, 64] tensor to [8, 64, 32, 64] (ONNX Expand).",
           [In("x", (1, 64, 1, 64))], "return x.expand(8, 64, 32, 64)",
           consts=[Const("shape", i64([8, 64, 32, 64]), "target shape")]),
        _t("pad_constant_4d", "Pad", "Constant padding (value 0.5) of H by (1, 3) and W by (2, 4) of an NCHW tensor.",
           [In("x", x4)], "return F.pad(x, (2, 4, 1, 3), mode=\"constant\", value=0.5)",
           consts=[Const("pads", i64([0, 0, 1, 2, 0, 0, 3, 4])), Const("constant_value", f32(0.5))],
           attrs={"mode": "constant"}),
        _t("pad_reflect_4d", "Pad", "Reflect padding of H and W by 2 on each side of an NCHW tensor.",
           [In("x", x4)], "return F.pad(x, (2, 2, 2, 2), mode=\"reflect\")",
           consts=[Const("pads", i64([0, 0, 2, 2, 0, 0, 2, 2]))], attrs={"mode": "reflect"}),
        _t("split_3way_axis1", "Split", "Split an NCHW tensor along channels into parts of 16, 32 and 48 channels.",
           [In("x", (8, 96, 56, 56))], "return tuple(torch.split(x, [16, 32, 48], dim=1))",
           outputs=[Out("y0"), Out("y1"), Out("y2")], consts=[Const("split", i64([16, 32, 48]))],
           attrs={"axis": 1}),
        _t("depth_to_space_dcr", "DepthToSpace",
           "DepthToSpace with block size 2 in DCR mode: [N, C, H, W] -> [N, C/4, 2H, 2W].",
           [In("x", (1, 256, 56, 56))],
           "n, c, h, w = x.shape\nbs = self.blocksize\n"
           "y = x.reshape(n, bs, bs, c // (bs * bs), h, w).permute(0, 3, 4, 1, 5, 2)\n"
           "return y.reshape(n, c // (bs * bs), h * bs, w * bs)",
           attrs={"blocksize": 2, "mode": "DCR"}, init_args=[("blocksize", 2)]),
        _t("space_to_depth_b2", "SpaceToDepth", "SpaceToDepth with block size 2: [N, C, H, W] -> [N, 4C, H/2, W/2].",
           [In("x", (1, 64, 112, 112))],
           "n, c, h, w = x.shape\nbs = self.blocksize\n"
           "y = x.reshape(n, c, h // bs, bs, w // bs, bs).permute(0, 3, 5, 1, 2, 4)\n"
           "return y.reshape(n, c * bs * bs, h // bs, w // bs)",
           attrs={"blocksize": 2}, init_args=[("blocksize", 2)]),
        _t("resize_nearest_x2", "Resize",
           "Nearest-neighbour upsampling of H and W by 2 (asymmetric coordinates, floor rounding).",
           [In("x", (1, 64, 56, 56))], "return F.interpolate(x, scale_factor=2.0, mode=\"nearest\")",
           consts=[Const("scales", f32([1, 1, 2, 2]))], node_inputs=["x", "", "scales"],
           attrs={"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}),
        _t("resize_bilinear_x2", "Resize",
           "Bilinear upsampling of H and W by 2 with half-pixel coordinates (align_corners=False).",
           [In("x", (1, 64, 56, 56))],
           "return F.interpolate(x, scale_factor=2.0, mode=\"bilinear\", align_corners=False)",
           consts=[Const("scales", f32([1, 1, 2, 2]))], node_inputs=["x", "", "scales"],
           attrs={"mode": "linear", "coordinate_transformation_mode": "half_pixel"}),
        _t("gather_elements_axis1", "GatherElements",
           "y[i][j] = x[i][indices[i][j]] (GatherElements / torch.gather along axis 1).",
           [In("x", (512, 512)), In("indices", (512, 256), dtype="int64", dist="integers", low=0, high=511)],
           "return torch.gather(x, 1, indices)", attrs={"axis": 1}),
        _t("gather_nd_pairs", "GatherND",
           "Gather rows x[i, j, :] for 4096 index pairs (i, j) (GatherND, batch_dims 0).",
           [In("x", (128, 128, 64)), In("indices", (4096, 2), dtype="int64", dist="integers", low=0, high=127)],
           "return x[indices[:, 0], indices[:, 1]]"),
        _t("scatter_nd_rows", "ScatterND",
           "Copy of x with 256 distinct rows replaced by rows of updates (ScatterND; the row indices are the "
           "constant (37 * k + 5) mod 1024, k = 0..255).",
           [In("x", (1024, 256)), In("updates", (n_upd, 256), low=-4, high=4)],
           "y = x.clone()\ny[self.rows] = updates\nreturn y",
           consts=[Const("indices", i64(scatter_rows.reshape(n_upd, 1)), "row index of each update, [256, 1]")],
           node_inputs=["x", "indices", "updates"],
           init_code="self.register_buffer(\"rows\", (torch.arange(256) * 37 + 5) % 1024, persistent=False)"),
        _t("cast_float_to_int32", "Cast", "Cast float32 to int32 (truncation toward zero).",
           [In("x", (32, 256, 128), low=-1000.0, high=1000.0)], "return x.to(torch.int32)",
           outputs=[Out("y", "int32")], attrs={"to": 6}),
        _t("cast_int32_to_float", "Cast", "Cast int32 to float32.",
           [In("x", (32, 256, 128), dtype="int32", dist="integers", low=-100000, high=100000)],
           "return x.to(torch.float32)", attrs={"to": 1}),
        _t("topk_last_largest", "TopK",
           "The 16 largest values of each row and their int64 indices, sorted descending (TopK axis -1).",
           [In("x", (1024, 512), dist="normal", low=0.0, high=1.0)],
           "values, indices = torch.topk(x, self.k, dim=-1, largest=True, sorted=True)\nreturn values, indices",
           outputs=[Out("values"), Out("indices", "int64")], consts=[Const("k", i64([16]), "k")],
           attrs={"axis": -1, "largest": 1, "sorted": 1}, init_args=[("k", 16)]),
        _t("topk_axis1_smallest", "TopK",
           "The 8 smallest values along axis 1 of a 3-D tensor and their int64 indices, sorted ascending.",
           [In("x", (16, 1024, 32), dist="normal", low=0.0, high=1.0)],
           "values, indices = torch.topk(x, self.k, dim=1, largest=False, sorted=True)\nreturn values, indices",
           outputs=[Out("values"), Out("indices", "int64")], consts=[Const("k", i64([8]), "k")],
           attrs={"axis": 1, "largest": 0, "sorted": 1}, init_args=[("k", 8)]),
        _t("cumsum_reverse_axis1", "CumSum",
           "Reverse cumulative sum along axis 1: y[i, j] = sum of x[i, j:] (CumSum reverse=1).",
           [In("x", (64, 4096))], "return torch.flip(torch.cumsum(torch.flip(x, dims=[1]), dim=1), dims=[1])",
           consts=[Const("axis", i64(1), "axis (scalar)")], attrs={"reverse": 1}, atol=1e-3,
           note="Prefix sums of up to 4096 terms accumulate float32 rounding differently per engine: atol 1e-3."),
        _t("trilu_upper_k1", "Trilu", "Upper triangle above the main diagonal (k=1) of each matrix of a batch.",
           [In("x", (16, 256, 256))], "return torch.triu(x, diagonal=1)",
           consts=[Const("k", i64(1), "diagonal offset (scalar)")], attrs={"upper": 1}),
    ]


def all_defs() -> list[TaskDef]:
    return reduction() + tensor()
