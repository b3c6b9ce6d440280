"""Edge input sets: the inputs a uniform draw almost never makes, by op class.

A task declares its sets in ``task.toml`` (``[[edges]]``, :class:`kit.suite.tasks.EdgeSpec`); the built-in
suite's generator and the importer both declare them with :func:`declare`, from the op type and the inputs.
Verification runs every declared set after the distribution's trials (:func:`kit.stages.verify.run_edges`),
each as one extra seeded input set: the distribution's draw (:func:`kit.suite.inputs.make_inputs`) with the
set's inputs rewritten by :func:`edge_inputs`.

The sets and the op classes that get them:

- ``ties`` (ArgMax, ArgMin, TopK, MaxPool, GlobalMaxPool): the float input drawn from three levels only, so
  most reductions see several equal maxima.  ONNX takes the first maximum (ArgMax/ArgMin
  ``select_last_index = 0``) and TopK puts the lower index first among equal values; a kernel that keeps
  the last fails.
- ``negative_indices`` (Gather, GatherElements, GatherND, ScatterElements, ScatterND, OneHot): an index input
  drawn from ``[0, s - 1]`` gets about half its elements shifted by ``-s`` (``s = high + 1``), covering
  ``[-s, -1]``, legal in ONNX (``[-s, s - 1]``) and naming the same elements.  Only a graph input drawn as
  integers from 0 gets the set (constant indices are the model's).
- ``special_values`` (elementwise arithmetic where IEEE 754 defines the result, and data movement): NaN,
  +inf, -inf and -0.0 written at spread positions of every float input; NaN must stay NaN where it lands.
- ``large_magnitude`` (Softmax, LogSoftmax, ReduceLogSumExp, Exp): the float input uniform in
  [-100, 100): exp(100) overflows float32 (max 3.4e38), so a kernel that does not subtract the maximum
  first gives inf or NaN where ONNX Runtime's does not.
- ``denormals`` (ops where a flushed subnormal changes the result by more than any tolerance: Log, Reciprocal,
  Ceil, Floor, Sign, ReduceLogSum, ArgMax, ArgMin, TopK, the float comparisons, Div's divisor, and Mul, MatMul
  and Gemm with a float second graph input): the rewritten inputs hold subnormal floats only (uniform over
  (0, 2**-126), a random sign unless the distribution is positive).  ONNX keeps them (IEEE 754 gradual
  underflow); a kernel that flushes them to zero (FTZ/DAZ, a ``x < FLT_MIN`` shortcut) gives -inf for Log, 0 for
  Ceil, inf for a finite quotient, another index among "equal" values.  Mul, MatMul and Gemm get their second
  input scaled by 2**126 (by a smaller power of two where a factor of 4 or more would overflow:
  :func:`scale_factor`), so the exact products are normal numbers of order 1 where a flush gives 0.  Ops
  where a flush changes the result by less than 1.2e-38 (Relu-like activations, Abs, Neg, sums and means,
  MatMul against a constant) do not get the set: it could not fail under any tolerance.
- ``size_one_axes`` (Softmax, LogSoftmax, Hardmax, ArgMax, ArgMin, the Reduce ops, CumSum, LpNormalization,
  when the model is given and the op's axis is longer than 1): the first input with the op's axis
  (``EdgeSpec.axis``; the first of a reduction's axes, the last axis when it reduces all) cut to length 1
  (one slice of the distribution's draw, picked at random): another input shape than the task's, which the
  runner feeds MNN as a resize (one runner process per shape) and ONNX Runtime gets a copy of the model with
  that dimension left free (:func:`kit.suite.reference.run_reference`).  Ops whose other inputs or
  attributes depend on that length (TopK's K, pooling windows, LayerNorm's scale) do not get it.
- ``empty_axes`` (the element-wise ops of :data:`EMPTY_UNARY` and :data:`EMPTY_BINARY`, Softmax, LogSoftmax,
  ArgMax, ArgMin, Transpose, the Reduce ops): the first axis the op does not work along (``EdgeSpec.axis``:
  0 for element-wise ops and Transpose; for the others the first axis :func:`op_axes` does not name) cut to
  length 0, run like ``size_one_axes``: ONNX gives an empty result of the op's shape, which ONNX Runtime
  computes for every built-in task that gets the set.  Element-wise inputs of a lower rank or of length 1
  there keep their draw (they broadcast to 0); a constant or inner value that would not broadcast, or a
  reduction of every axis, and the set is not declared.  :class:`~kit.suite.tasks.TensorSpec` keeps
  dimensions > 0: only the set's arrays are empty.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np
import onnx
from onnx import numpy_helper

from kit.suite.inputs import make_inputs
from kit.suite.tasks import EdgeSpec, Task, TensorSpec

#: ``empty_axes``: element-wise ops of one input (no axis of their own: the first axis is cut)
EMPTY_UNARY = frozenset({"Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Ceil", "Celu", "Cos", "Cosh", "Erf",
                         "Exp", "Floor", "HardSigmoid", "LeakyRelu", "Log", "Neg", "Not", "Reciprocal", "Relu", "Round",
                         "Sigmoid", "Sign", "Sin", "Sinh", "Sqrt", "Tan", "Tanh"})
#: ``empty_axes``: element-wise ops of several (broadcast) inputs
EMPTY_BINARY = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "And", "Or", "Xor", "Equal", "Greater",
                          "Less", "GreaterOrEqual", "LessOrEqual", "Where"})
#: edge set → the op types that get it
EDGE_OPS: dict[str, frozenset[str]] = {
    "ties": frozenset({"ArgMax", "ArgMin", "TopK", "MaxPool", "GlobalMaxPool"}),
    "negative_indices": frozenset({"Gather", "GatherElements", "GatherND", "ScatterElements", "ScatterND",
                                   "OneHot"}),
    "special_values": frozenset({"Abs", "Neg", "Add", "Sub", "Mul", "Div", "Exp", "Floor", "Ceil", "Round",
                                 "Sqrt", "Reciprocal", "Identity", "Transpose", "Reshape", "Flatten", "Squeeze",
                                 "Unsqueeze", "Concat", "Slice", "Split", "Tile", "Expand", "DepthToSpace",
                                 "SpaceToDepth"}),
    "large_magnitude": frozenset({"Softmax", "LogSoftmax", "ReduceLogSumExp", "Exp"}),
    "denormals": frozenset({"Log", "Reciprocal", "Ceil", "Floor", "Sign", "ReduceLogSum", "ArgMax", "ArgMin", "TopK",
                            "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Equal", "Div", "Mul", "MatMul",
                            "Gemm"}),
    "size_one_axes": frozenset({"Softmax", "LogSoftmax", "Hardmax", "ArgMax", "ArgMin", "CumSum", "LpNormalization",
                                "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                                "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}),
    "empty_axes": frozenset({*EMPTY_UNARY, *EMPTY_BINARY, "Softmax", "LogSoftmax", "ArgMax", "ArgMin", "Transpose",
                             "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                             "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}),
}
#: why each set matters, written into ``[[edges]] why``
WHY: dict[str, str] = {
    "ties": "equal maxima: ONNX takes the first (select_last_index = 0; TopK: lower index first)",
    "negative_indices": "ONNX allows indices in [-s, s-1]; a negative one counts from the end",
    "special_values": "NaN, +-inf and -0.0 propagate as IEEE 754 defines",
    "large_magnitude": "exp overflows float32 above 88.7: the maximum must be subtracted first",
    "denormals": "subnormal floats are kept by ONNX (gradual underflow); a kernel that flushes them to zero differs",
    "size_one_axes": "the op's axis of length 1 (another input shape than the task's): a kernel must not assume more",
    "empty_axes": "an axis the op does not work along of length 0 (an empty batch): ONNX gives an empty result of "
                  "that shape",
}
#: the values ``special_values`` writes, in turn
SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0], dtype=np.float32)
#: ``large_magnitude``'s inputs: uniform in [-LARGE, LARGE)
LARGE = 100.0
#: ``ties``: the number of distinct values the input is drawn from
TIE_LEVELS = 3
#: ``denormals``: op type -> (the input positions made subnormal, the input positions scaled by :data:`DENORMAL_SCALE`)
DENORMAL_INPUTS: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "Div": ((1,), ()), "Mul": ((0,), (1,)), "MatMul": ((0,), (1,)), "Gemm": ((0,), (1,)),
    **{op: ((0, 1), ()) for op in ("Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Equal")},
}
#: the scale of a product's other factor: a subnormal (< 2**-126) times it is a normal number below 1
DENORMAL_SCALE = np.float32(2.0**126)
#: ``size_one_axes``: op type -> the default of its ``axis`` attribute, for the ops that have one; the Reduce ops
#: and CumSum take theirs from a constant input (:func:`op_axis`)
AXIS_ATTR: dict[str, int] = {"Softmax": -1, "LogSoftmax": -1, "Hardmax": -1, "LpNormalization": -1, "ArgMax": 0,
                             "ArgMin": 0}


def _wanted(name: str, spec) -> bool:  # noqa: ANN001 - a TensorSpec or a kit.suite.spec.In
    """Whether the input ``spec`` (``dtype``, ``distribution`` or ``dist``, ``low``) takes edge set ``name``."""
    dist = getattr(spec, "distribution", None) or getattr(spec, "dist", "uniform")
    if name == "negative_indices":
        return spec.dtype in ("int32", "int64") and dist == "integers" and int(spec.low) == 0
    return spec.dtype == "float32"


def _node(op_type: str, model: onnx.ModelProto | None) -> onnx.NodeProto | None:
    """The first node of ``op_type`` in ``model`` (None without a model or such a node)."""
    if model is None:
        return None
    return next((n for n in model.graph.node if n.op_type == op_type), None)


def _given_axes(node: onnx.NodeProto, model: onnx.ModelProto) -> list[int] | None:
    """The axes ``node`` names (may be negative): its ``axis`` attribute (default by :data:`AXIS_ATTR`), or for
    the Reduce ops the constant ``axes`` (input 1 or the attribute; [] when none are given) and CumSum's
    constant axis input.  None when they are not constants of the model (a graph input)."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    if node.op_type in AXIS_ATTR:
        return [int(attrs.get("axis", AXIS_ATTR[node.op_type]))]
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    consts = {n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in model.graph.node
              if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value"}
    src = node.input[1] if len(node.input) > 1 and node.input[1] else ""
    if src and src not in inits and src not in consts:
        return None
    return [int(a) for a in np.ravel(inits.get(src, consts.get(src, attrs.get("axes", []))))]


def _reduces_nothing(node: onnx.NodeProto) -> bool:
    """Whether ``node`` with no axes given leaves its input as it is (``noop_with_empty_axes``; CumSum has none)."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    return bool(attrs.get("noop_with_empty_axes", 0)) or node.op_type == "CumSum"


def op_axis(node: onnx.NodeProto, model: onnx.ModelProto, rank: int) -> int | None:
    """The axis (in [0, rank)) ``node`` works along for ``size_one_axes``: its ``axis`` attribute (default by
    :data:`AXIS_ATTR`), or for the Reduce ops the first of the constant ``axes`` (input 1 or the attribute; the
    last axis when it reduces them all) and CumSum's constant axis input.  None when the axis is not a
    constant of the model (a graph input) or a reduction with empty axes reduces nothing
    (``noop_with_empty_axes``)."""
    axes = _given_axes(node, model)
    if axes is None or (not axes and _reduces_nothing(node)):
        return None
    axis = axes[0] if axes else rank - 1
    return axis % rank if -rank <= axis < rank else None


def op_axes(node: onnx.NodeProto, model: onnx.ModelProto, rank: int) -> list[int] | None:
    """Every axis (in [0, rank)) ``node`` works along (:func:`op_axis`'s sources; all of them for a reduction
    with no axes given), None where :func:`op_axis` is None or an axis is out of range."""
    axes = _given_axes(node, model)
    if axes is None or (not axes and _reduces_nothing(node)):
        return None
    axes = axes or list(range(rank))
    return [a % rank for a in axes] if all(-rank <= a < rank for a in axes) else None


def _graph_positions(op_type: str, inputs: list, model: onnx.ModelProto | None) -> dict[int, object]:
    """Node input position -> the graph input (spec) feeding it: by name through ``model``'s node of
    ``op_type``, else the inputs in order (a one-node task whose every node input is a graph input)."""
    node = _node(op_type, model)
    if node is None:
        return dict(enumerate(inputs))
    by_name = {i.name: i for i in inputs}
    return {k: by_name[n] for k, n in enumerate(node.input) if n in by_name}


def _denormal_names(op_type: str, inputs: list, model: onnx.ModelProto | None) -> list[str]:
    """The inputs ``denormals`` makes subnormal (:data:`DENORMAL_INPUTS`, default: the first); none when a
    position it needs (a subnormal or a scaled factor) is not a float32 graph input."""
    sub, scaled = DENORMAL_INPUTS.get(op_type, ((0,), ()))
    at = _graph_positions(op_type, inputs, model)
    if not all(k in at and at[k].dtype == "float32" for k in (*sub, *scaled)):
        return []
    return [at[k].name for k in sub]


def _size_one(op_type: str, inputs: list, model: onnx.ModelProto | None) -> tuple[list[str], int | None]:
    """(the input ``size_one_axes`` cuts, its axis), or ([], None): no model, the axis not a constant, or the
    axis of length 1 already (the distribution's trials cover it)."""
    node = _node(op_type, model)
    first = _graph_positions(op_type, inputs, model).get(0)
    if node is None or first is None or first.dtype != "float32":
        return [], None
    shape = list(first.shape)
    axis = op_axis(node, model, len(shape)) if shape else None
    if axis is None or shape[axis] <= 1:
        return [], None
    return [first.name], axis


def _const_shapes(model: onnx.ModelProto | None) -> dict[str, tuple[int, ...]]:
    """Initializer name -> its shape (empty without a model)."""
    return {} if model is None else {i.name: tuple(i.dims) for i in model.graph.initializer}


def _empty_broadcast(op_type: str, inputs: list, model: onnx.ModelProto | None) -> tuple[list[str], int | None]:
    """``empty_axes`` of an element-wise op of several inputs: axis 0 of the graph inputs of the highest rank
    whose first dimension is the largest (the others broadcast to 0: lower ranks, or 1 there), or ([], None)
    when a constant or an inner value of that rank has a first dimension above 1 (it would not broadcast)."""
    node = _node(op_type, model)
    fed = _graph_positions(op_type, inputs, model)
    consts = _const_shapes(model)
    shapes = [tuple(s.shape) for s in fed.values()]
    rank = max((len(s) for s in shapes), default=0)
    if rank == 0:
        return [], None
    top = max(s[0] for s in shapes if len(s) == rank)
    if node is not None:
        for name in node.input:
            if not name or any(s.name == name for s in fed.values()):
                continue
            shape = consts.get(name)
            if shape is None or len(shape) > rank or (len(shape) == rank and shape[0] > 1):
                return [], None
    return [s.name for s in fed.values() if len(s.shape) == rank and s.shape[0] == top], 0


def _empty(op_type: str, inputs: list, model: onnx.ModelProto | None) -> tuple[list[str], int | None]:
    """(the inputs ``empty_axes`` cuts to length 0, the axis), or ([], None): the first axis the op does not
    work along (element-wise ops and Transpose: axis 0; Softmax, ArgMax, the Reduce ops: the first axis not
    named by :func:`op_axes`, which needs ``model``), of the first input (several element-wise inputs:
    :func:`_empty_broadcast`)."""
    if op_type in EMPTY_BINARY:
        return _empty_broadcast(op_type, inputs, model)
    first = _graph_positions(op_type, inputs, model).get(0)
    if first is None or not first.shape:
        return [], None
    if op_type in EMPTY_UNARY or op_type == "Transpose":
        return [first.name], 0
    node = _node(op_type, model)
    axes = op_axes(node, model, len(first.shape)) if node is not None else None
    free = [a for a in range(len(first.shape)) if axes is not None and a not in axes]
    return ([first.name], free[0]) if free else ([], None)


def declare(op_type: str, inputs: Iterable, model: onnx.ModelProto | None = None) -> list[EdgeSpec]:
    """The edge sets a task of ``op_type`` with ``inputs`` (:class:`~kit.suite.tasks.TensorSpec` or
    :class:`kit.suite.spec.In`, in graph order) gets, in :data:`EDGE_OPS` order: ``ties`` and
    ``large_magnitude`` rewrite the first input when it is float32, ``special_values`` every float32 input,
    ``negative_indices`` every integer input drawn from 0, ``denormals`` the inputs of :data:`DENORMAL_INPUTS`,
    ``size_one_axes`` the first input along the op's axis (only with ``model``, the task's ONNX model, which
    says the axis), ``empty_axes`` the inputs :func:`_empty` names (Softmax, ArgMax and the Reduce ops only
    with ``model``).  Empty for an op type of no class."""
    inputs = list(inputs)
    out = []
    for name, ops in EDGE_OPS.items():
        if op_type not in ops or not inputs:
            continue
        axis = None
        if name in ("ties", "large_magnitude"):
            names = [inputs[0].name] if inputs[0].dtype == "float32" else []
        elif name == "denormals":
            names = _denormal_names(op_type, inputs, model)
        elif name == "size_one_axes":
            names, axis = _size_one(op_type, inputs, model)
        elif name == "empty_axes":
            names, axis = _empty(op_type, inputs, model)
        else:
            names = [i.name for i in inputs if _wanted(name, i)]
        if names:
            out.append(EdgeSpec(name=name, inputs=names, why=WHY[name], axis=axis))
    return out


def edge_rng(task_id: str, name: str, seed: int) -> np.random.Generator:
    """The generator of edge set ``name`` of a task at ``seed``: PCG64 seeded by sha256 of the three."""
    digest = hashlib.sha256(f"{task_id}/edges/{name}/{seed}".encode()).digest()
    return np.random.Generator(np.random.PCG64(int.from_bytes(digest[:16], "little")))


def _span(spec: TensorSpec) -> tuple[float, float]:
    """The value range of a float input's distribution (normal: mean +- std)."""
    if spec.distribution == "normal":
        return spec.low - spec.high, spec.low + spec.high
    return (max(spec.low, 1e-3), spec.high) if spec.distribution == "positive" else (spec.low, spec.high)


def _subnormals(spec: TensorSpec, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """float32 subnormals of ``shape``: the bit patterns 1 .. 2**23 - 1 (uniform over (0, 2**-126)), negative
    with probability 1/2 unless ``spec``'s range is positive."""
    bits = rng.integers(1, 1 << 23, size=shape, dtype=np.uint32)
    if _span(spec)[0] < 0:
        bits |= (rng.random(shape) < 0.5).astype(np.uint32) << np.uint32(31)
    return bits.view(np.float32)


def _rewrite(name: str, spec: TensorSpec, base: np.ndarray, rng: np.random.Generator,
             axis: int | None = None) -> np.ndarray:
    """``base`` (the distribution's draw of ``spec``) rewritten for edge set ``name`` (module docstring)."""
    if name == "ties":
        lo, hi = _span(spec)
        levels = np.linspace(lo, hi, TIE_LEVELS, dtype=np.float32)
        return levels[rng.integers(0, TIE_LEVELS, size=base.shape)]
    if name == "negative_indices":
        s = int(spec.high) + 1
        return np.where(rng.random(base.shape) < 0.5, base - s, base).astype(base.dtype)
    if name == "large_magnitude":
        return rng.uniform(-LARGE, LARGE, size=base.shape).astype(np.float32)
    if name == "denormals":
        return _subnormals(spec, base.shape, rng)
    if name == "size_one_axes":
        assert axis is not None, "size_one_axes needs its axis (kit.suite.tasks.EdgeSpec checks it)"
        pick = int(rng.integers(0, base.shape[axis]))
        return np.ascontiguousarray(np.take(base, [pick], axis=axis))
    if name == "empty_axes":
        assert axis is not None, "empty_axes needs its axis (kit.suite.tasks.EdgeSpec checks it)"
        return np.ascontiguousarray(np.take(base, np.arange(0), axis=axis))
    out = base.copy().reshape(-1)
    k = max(len(SPECIAL), out.size // 64)
    where = rng.choice(out.size, size=min(k, out.size), replace=False)
    out[where] = np.resize(SPECIAL, where.size)
    return out.reshape(base.shape)


def _scaled_names(task: Task) -> list[str]:
    """The inputs ``denormals`` scales by :data:`DENORMAL_SCALE` for ``task`` (positions by its ONNX model)."""
    scaled = DENORMAL_INPUTS.get(task.op_type, ((), ()))[1]
    if not scaled:
        return []
    model = onnx.load(str(task.onnx_path), load_external_data=False) if task.path is not None else None
    at = _graph_positions(task.op_type, list(task.inputs), model)
    return [at[k].name for k in scaled if k in at]


def scale_factor(x: np.ndarray) -> np.ndarray:
    """``x`` (float32, a product's other factor) times :data:`DENORMAL_SCALE`, or times a smaller power of two
    where that would overflow float32 (max < 2**128): 2**126 / 2**k with k the least that keeps the largest
    ``|x|`` finite (k = floor(log2 max|x|) - 1 for max|x| >= 4; 0 below, so such a factor is scaled as before).
    A power of two keeps every mantissa; the products with a subnormal stay normal numbers instead of inf."""
    big = float(np.max(np.abs(x), initial=0.0, where=np.isfinite(x)))
    k = max(0, int(np.floor(np.log2(big))) - 1) if big >= 4.0 else 0
    return (x * np.float32(2.0 ** (126 - k))).astype(np.float32)


def edge_inputs(task: Task, edge: EdgeSpec, seed: int) -> dict[str, np.ndarray]:
    """The input set of ``edge`` for ``task`` at ``seed``: :func:`kit.suite.inputs.make_inputs` with the set's
    inputs rewritten (module docstring; ``denormals`` also scales the other factor of a product).
    Deterministic in (task id, set, seed).  ``size_one_axes`` gives another shape than the task's.

    Raises:
        KeyError: ``edge`` names an input the task has not (:class:`~kit.suite.tasks.Task` refuses such a task).
    """
    base = make_inputs(task, seed)
    rng = edge_rng(task.id, edge.name, seed)
    specs = {s.name: s for s in task.inputs}
    for name in edge.inputs:
        base[name] = _rewrite(edge.name, specs[name], base[name], rng, edge.axis)
    if edge.name == "denormals":
        for name in _scaled_names(task):
            base[name] = scale_factor(base[name])
    return base


def edge_table(edges: list[EdgeSpec]) -> list[dict]:
    """``[[edges]]`` tables of ``task.toml`` (name, inputs, why, axis: None is left out) for :func:`kit.suite.tomlw.dumps_mapping`."""
    return [{"name": e.name, "inputs": list(e.inputs), "why": e.why, "axis": e.axis} for e in edges]
