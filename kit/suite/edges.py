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
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np

from kit.suite.inputs import make_inputs
from kit.suite.tasks import EdgeSpec, Task, TensorSpec

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
}
#: why each set matters, written into ``[[edges]] why``
WHY: dict[str, str] = {
    "ties": "equal maxima: ONNX takes the first (select_last_index = 0; TopK: lower index first)",
    "negative_indices": "ONNX allows indices in [-s, s-1]; a negative one counts from the end",
    "special_values": "NaN, +-inf and -0.0 propagate as IEEE 754 defines",
    "large_magnitude": "exp overflows float32 above 88.7: the maximum must be subtracted first",
}
#: the values ``special_values`` writes, in turn
SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0], dtype=np.float32)
#: ``large_magnitude``'s inputs: uniform in [-LARGE, LARGE)
LARGE = 100.0
#: ``ties``: the number of distinct values the input is drawn from
TIE_LEVELS = 3


def _wanted(name: str, spec) -> bool:  # noqa: ANN001 - a TensorSpec or a kit.suite.spec.In
    """Whether the input ``spec`` (``dtype``, ``distribution`` or ``dist``, ``low``) takes edge set ``name``."""
    dist = getattr(spec, "distribution", None) or getattr(spec, "dist", "uniform")
    if name == "negative_indices":
        return spec.dtype in ("int32", "int64") and dist == "integers" and int(spec.low) == 0
    return spec.dtype == "float32"


def declare(op_type: str, inputs: Iterable) -> list[EdgeSpec]:
    """The edge sets a task of ``op_type`` with ``inputs`` (:class:`~kit.suite.tasks.TensorSpec` or
    :class:`kit.suite.spec.In`, in graph order) gets, in :data:`EDGE_OPS` order: ``ties`` and
    ``large_magnitude`` rewrite the first input when it is float32, ``special_values`` every float32 input,
    ``negative_indices`` every integer input drawn from 0.  Empty for an op type of no class."""
    inputs = list(inputs)
    out = []
    for name, ops in EDGE_OPS.items():
        if op_type not in ops or not inputs:
            continue
        if name in ("ties", "large_magnitude"):
            names = [inputs[0].name] if inputs[0].dtype == "float32" else []
        else:
            names = [i.name for i in inputs if _wanted(name, i)]
        if names:
            out.append(EdgeSpec(name=name, inputs=names, why=WHY[name]))
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


def _rewrite(name: str, spec: TensorSpec, base: np.ndarray, rng: np.random.Generator) -> np.ndarray:
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
    out = base.copy().reshape(-1)
    k = max(len(SPECIAL), out.size // 64)
    where = rng.choice(out.size, size=min(k, out.size), replace=False)
    out[where] = np.resize(SPECIAL, where.size)
    return out.reshape(base.shape)


def edge_inputs(task: Task, edge: EdgeSpec, seed: int) -> dict[str, np.ndarray]:
    """The input set of ``edge`` for ``task`` at ``seed``: :func:`kit.suite.inputs.make_inputs` with the set's
    inputs rewritten (module docstring).  Deterministic in (task id, set, seed).

    Raises:
        KeyError: ``edge`` names an input the task has not (:class:`~kit.suite.tasks.Task` refuses such a task).
    """
    base = make_inputs(task, seed)
    rng = edge_rng(task.id, edge.name, seed)
    specs = {s.name: s for s in task.inputs}
    for name in edge.inputs:
        base[name] = _rewrite(edge.name, specs[name], base[name], rng)
    return base


def edge_table(edges: list[EdgeSpec]) -> list[dict]:
    """``[[edges]]`` tables of ``task.toml`` (name, inputs, why) for :func:`kit.suite.tomlw.dumps_mapping`."""
    return [{"name": e.name, "inputs": list(e.inputs), "why": e.why} for e in edges]
