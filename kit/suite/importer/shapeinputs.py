"""Graph inputs of a given ONNX model that set a shape rather than carry data (TopK's K, Reshape's shape, Expand,
Tile, Range, Slice, Pad, Resize's sizes, ...): the importer makes each a constant of the value it feeds, so the
outputs' shapes in ``task.toml`` are the ones every verification run gets (drawn afresh per seed, a K of 1 at
import and of 3 in the audit gave outputs of another shape).

An input is fixed only when every use of it is such a position (:data:`SHAPE_INPUTS`); TopK's K is clamped to
[1, the axis' length] (the default draw of an integer input, [0, 9], may give 0 or more than the axis holds).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import onnx
from onnx import numpy_helper

from kit.suite.tasks import TensorSpec

#: op type -> the input positions that set an output's shape (ONNX operator docs, opset 20)
SHAPE_INPUTS: dict[str, tuple[int, ...]] = {
    "TopK": (1,), "Reshape": (1,), "Expand": (1,), "Tile": (1,), "Range": (0, 1, 2), "Slice": (1, 2, 3, 4),
    "ConstantOfShape": (0,), "Resize": (2, 3), "Upsample": (1,), "Pad": (1, 3), "Unsqueeze": (1,), "Squeeze": (1,),
    "OneHot": (1,), "Split": (1,), "CenterCropPad": (1,), "Trilu": (1,),
    **{op: (1,) for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                            "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")},
}


def fix_shape_inputs(model: onnx.ModelProto, specs: list[TensorSpec], feeds: dict[str, np.ndarray]
                     ) -> tuple[list[TensorSpec], dict[str, np.ndarray], list[str]]:
    """Make the shape-setting graph inputs of ``model`` initializers holding their fed value (in place), and
    return the remaining specs and feeds and one note per fixed input ("k: TopK's K, fixed to [3]")."""
    uses: dict[str, list[tuple[onnx.NodeProto, int]]] = defaultdict(list)
    for node in model.graph.node:
        for idx, name in enumerate(node.input):
            if name:
                uses[name].append((node, idx))
    notes: list[str] = []
    fixed: set[str] = set()
    for spec in specs:
        places = uses.get(spec.name, [])
        if not places or spec.dtype not in ("int32", "int64"):
            continue
        if not all(i in SHAPE_INPUTS.get(n.op_type, ()) for n, i in places):
            continue
        value = feeds[spec.name]
        for node, _ in places:
            if node.op_type == "TopK":
                value = np.clip(value, 1, _axis_len(node, specs))
        model.graph.initializer.append(numpy_helper.from_array(value.astype(feeds[spec.name].dtype), spec.name))
        kept = [vi for vi in model.graph.input if vi.name != spec.name]
        del model.graph.input[:]
        model.graph.input.extend(kept)
        fixed.add(spec.name)
        what = ", ".join(sorted({f"{n.op_type} input {i}" for n, i in places}))
        notes.append(f"{spec.name}: sets a shape ({what}), fixed to {value.tolist()}")
    return ([s for s in specs if s.name not in fixed], {k: v for k, v in feeds.items() if k not in fixed}, notes)


def _axis_len(node: onnx.NodeProto, specs: list[TensorSpec]) -> int:
    """The length of a TopK node's axis when its data input is a graph input (else a large bound)."""
    axis = next((a.i for a in node.attribute if a.name == "axis"), -1)
    data = next((s for s in specs if s.name == node.input[0]), None)
    return data.shape[axis] if data is not None else np.iinfo(np.int32).max


#: op type -> (position of the index input, position of the data input it indexes) (ONNX operator docs)
INDEX_INPUTS: dict[str, tuple[int, int]] = {"Gather": (1, 0), "GatherElements": (1, 0), "ScatterElements": (1, 0),
                                            "GatherND": (1, 0), "OneHot": (0, 1)}


def _index_length(node: onnx.NodeProto, idx: int, shapes: dict[str, list[int]], consts: dict[str, np.ndarray],
                  index_shape: list[int]) -> int | None:
    """The length s of what input ``idx`` of ``node`` indexes (legal indices [-s, s - 1]), or None.  Gather*,
    ScatterElements: the data input's ``axis``; GatherND: the shortest of the data axes an index tuple names
    (after ``batch_dims``; equal lengths give the whole legal range); OneHot: its constant ``depth``."""
    where = INDEX_INPUTS.get(node.op_type)
    if where is None or idx != where[0] or len(node.input) <= where[1]:
        return None
    attrs = {a.name: a.i for a in node.attribute if a.type == onnx.AttributeProto.INT}
    if node.op_type == "OneHot":
        depth = consts.get(node.input[where[1]])
        return int(np.ravel(depth)[0]) if depth is not None and depth.size == 1 else None
    data = shapes.get(node.input[where[1]])
    if data is None:
        return None
    if node.op_type == "GatherND":
        batch = attrs.get("batch_dims", 0)
        named = data[batch:batch + index_shape[-1]] if index_shape else []
        return min(named) if named else None
    return data[attrs.get("axis", 0)]


def index_ranges(model: onnx.ModelProto, specs: list[TensorSpec]) -> dict[str, int]:
    """Integer graph inputs used only as indices (:data:`INDEX_INPUTS`: Gather, GatherElements, ScatterElements
    and GatherND into a graph input, OneHot's indices of a constant depth): name -> the length s they index
    (the legal indices are [-s, s - 1])."""
    shapes = {s.name: s.shape for s in specs}
    consts = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    out: dict[str, int] = {}
    for spec in specs:
        if spec.dtype not in ("int32", "int64"):
            continue
        lengths = {_index_length(node, idx, shapes, consts, list(spec.shape))
                   for node in model.graph.node for idx, name in enumerate(node.input) if name == spec.name}
        if lengths and None not in lengths and len(lengths) == 1:
            out[spec.name] = lengths.pop()
    return out


def bound_indices(model: onnx.ModelProto, specs: list[TensorSpec]) -> list[TensorSpec]:
    """``specs`` with every index input of :func:`index_ranges` drawn in [0, s - 1] (valid whatever the default
    integer range of a given model's inputs)."""
    ranges = index_ranges(model, specs)
    return [s.model_copy(update={"distribution": "integers", "low": 0.0, "high": float(ranges[s.name] - 1)})
            if s.name in ranges else s for s in specs]


def widen_indices(model: onnx.ModelProto, specs: list[TensorSpec]) -> tuple[list[TensorSpec], list[str]]:
    """``specs`` with every index input of :func:`index_ranges` drawn over its whole legal range, negative
    indices included (``--widen-inputs``), and a note for each."""
    ranges = index_ranges(model, specs)
    out, notes = [], []
    for s in specs:
        if s.name in ranges:
            n = ranges[s.name]
            s = s.model_copy(update={"distribution": "integers", "low": float(-n), "high": float(n - 1)})
            notes.append(f"{s.name}: indices over the whole legal range [-{n}, {n - 1}] (--widen-inputs)")
        out.append(s)
    return out, notes
