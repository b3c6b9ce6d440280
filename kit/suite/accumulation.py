"""The accumulation length K of a task's op: how many rounded float32 terms one output element sums (or multiplies).

K is what the deterministic error bound of a sum depends on: computed in floating point with unit roundoff u, a sum
of K terms (a dot product of length K) is within ``gamma_K * sum|x_i|`` of the exact one, ``gamma_K = K u / (1 - K
u)`` (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §3.1, eq. 3.4-3.5; §4.2 for summation in
any order).  :mod:`kit.suite.tolerance` derives a task's relative tolerance floor from it.

:func:`accumulation_length` reads K from the task's node (its attributes) and the shapes of its inputs (graph
inputs, initializers and, for an imported task whose op follows shape-only helpers, ONNX shape inference).  Ops
without an accumulation (element-wise ops, data movement, comparisons, max/min) have K = 1.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

Shapes = dict[str, list[int]]


def _prod(dims: list[int]) -> int:
    return int(np.prod(dims)) if dims else 1


def _attr(node, name: str, default=None):  # noqa: ANN001 - an onnx.NodeProto
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _const(model, name: str) -> np.ndarray | None:  # noqa: ANN001 - an onnx.ModelProto
    from onnx import numpy_helper

    for init in model.graph.initializer:
        if init.name == name:
            return numpy_helper.to_array(init)
    return None


def _axis(rank: int, axis: int) -> int:
    return axis + rank if axis < 0 else axis


def _reduce(node, model, x: list[int]) -> int:  # noqa: ANN001
    if node.op_type in ("ReduceMax", "ReduceMin"):
        return 1  # a maximum rounds nothing
    axes = _attr(node, "axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        c = _const(model, node.input[1])
        axes = None if c is None else [int(a) for a in np.ravel(c)]
    if not axes:
        return 1 if _attr(node, "noop_with_empty_axes", 0) else _prod(x)
    return _prod([x[_axis(len(x), int(a))] for a in axes])


def _text(value) -> str:  # noqa: ANN001 - an attribute value: bytes or str
    return value.decode() if isinstance(value, bytes) else str(value)


def _einsum(node, shapes: Shapes) -> int:  # noqa: ANN001
    eq = _text(_attr(node, "equation", "")).replace(" ", "")
    lhs, _, rhs = eq.partition("->")
    sizes: dict[str, int] = {}
    for term, name in zip(lhs.split(","), node.input):
        letters = re.sub(r"\.\.\.", "", term)
        dims = shapes.get(name, [])
        for letter, d in zip(letters, dims[len(dims) - len(letters):] if "..." in term else dims):
            sizes[letter] = d
    contracted = set(re.sub(r"[^A-Za-z]", "", lhs)) - set(rhs)
    return _prod([sizes.get(c, 1) for c in sorted(contracted)])


def _stft(node, model, shapes: Shapes) -> int:  # noqa: ANN001
    """The frame length: the window's length (input 2), else the frame_length input (3)."""
    if len(node.input) > 2 and node.input[2] and node.input[2] in shapes:
        return shapes[node.input[2]][0]
    c = _const(model, node.input[3]) if len(node.input) > 3 and node.input[3] else None
    return int(np.ravel(c)[0]) if c is not None else 1


def _rule(op: str) -> Callable[..., int] | None:
    """K of ``op`` as a function of (node, model, shapes, x = the first input's shape), or None: K = 1."""
    conv_t = lambda n, m, s, x: (s[n.input[1]][0] // max(1, _attr(n, "group", 1))) * _prod(s[n.input[1]][2:])  # noqa: E731
    rules: dict[str, Callable[..., int]] = {
        "MatMul": lambda n, m, s, x: x[-1],
        "Gemm": lambda n, m, s, x: x[0] if _attr(n, "transA", 0) else x[-1],
        "Conv": lambda n, m, s, x: _prod(s[n.input[1]][1:]),
        "ConvTranspose": conv_t,
        "Einsum": lambda n, m, s, x: _einsum(n, s),
        "GlobalAveragePool": lambda n, m, s, x: _prod(x[2:]),
        "GlobalLpPool": lambda n, m, s, x: _prod(x[2:]),
        "AveragePool": lambda n, m, s, x: _prod(list(_attr(n, "kernel_shape", []))),
        "LpPool": lambda n, m, s, x: _prod(list(_attr(n, "kernel_shape", []))),
        "Softmax": lambda n, m, s, x: x[_axis(len(x), _attr(n, "axis", -1))],
        "LogSoftmax": lambda n, m, s, x: x[_axis(len(x), _attr(n, "axis", -1))],
        "LayerNormalization": lambda n, m, s, x: _prod(x[_axis(len(x), _attr(n, "axis", -1)):]),
        "InstanceNormalization": lambda n, m, s, x: _prod(x[2:]),
        "GroupNormalization": lambda n, m, s, x: x[1] // max(1, _attr(n, "num_groups", 1)) * _prod(x[2:]),
        "LpNormalization": lambda n, m, s, x: x[_axis(len(x), _attr(n, "axis", -1))],
        "MeanVarianceNormalization": lambda n, m, s, x: _prod([x[_axis(len(x), a)] for a in
                                                                 _attr(n, "axes", [0, 2, 3])]),
        "CumSum": lambda n, m, s, x: x[_axis(len(x), int(np.ravel(_const(m, n.input[1]))[0]))]
        if _const(m, n.input[1]) is not None else max(x),
        "Det": lambda n, m, s, x: x[-1],
        "LSTM": lambda n, m, s, x: x[-1] + int(_attr(n, "hidden_size", 0)),
        "GRU": lambda n, m, s, x: x[-1] + int(_attr(n, "hidden_size", 0)),
        "RNN": lambda n, m, s, x: x[-1] + int(_attr(n, "hidden_size", 0)),
        "STFT": lambda n, m, s, x: _stft(n, m, s),
        "DFT": lambda n, m, s, x: x[-2] if len(x) > 1 else x[0],
        "Resize": lambda n, m, s, x: {"nearest": 1, "cubic": 4}.get(_text(_attr(n, "mode", "nearest")), 2)
        ** max(1, len(x) - 2),
        "RoiAlign": lambda n, m, s, x: 4 * max(1, int(_attr(n, "sampling_ratio", 2))) ** 2,
        "Sum": lambda n, m, s, x: len(n.input),
        "Mean": lambda n, m, s, x: len(n.input),
    }
    if op.startswith("Reduce"):
        return lambda n, m, s, x: _reduce(n, m, x)
    return rules.get(op)


def shapes_of(model) -> Shapes:  # noqa: ANN001 - an onnx.ModelProto
    """Name -> static shape of every graph input, initializer and inferred intermediate value (dims without a
    value are left out of nothing: a symbolic dim reads as 1)."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - inference is a help here, the graph inputs still have shapes
        inferred = model
    out: Shapes = {i.name: list(i.dims) for i in model.graph.initializer}
    for vi in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
            out[vi.name] = [d.dim_value or 1 for d in vi.type.tensor_type.shape.dim]
    return out


def accumulation_length(op_type: str, model) -> tuple[int, str]:  # noqa: ANN001 - an onnx.ModelProto
    """(K, how it was read) for the first node of ``op_type`` in ``model``; (1, "...") for an op without an
    accumulation or a node whose shapes are unknown (said in the second item)."""
    node = next((n for n in model.graph.node if n.op_type == op_type), None)
    rule = _rule(op_type)
    if node is None or rule is None:
        return 1, f"{op_type}: no accumulation (element-wise, data movement or an exact selection)"
    shapes = shapes_of(model)
    try:
        k = int(rule(node, model, shapes, shapes[node.input[0]]))
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        return 1, f"{op_type}: shapes not known ({type(exc).__name__}), K = 1 assumed"
    return max(1, k), f"{op_type}: {K_HOW.get(op_type, 'the reduced elements' if op_type.startswith('Reduce') else 'terms per output')}"


#: how K is read, per op (for the reason written into task.toml)
K_HOW: dict[str, str] = {
    "MatMul": "the inner dimension", "Gemm": "the inner dimension", "Einsum": "the contracted dimensions",
    "Conv": "input channels per group x kernel size", "ConvTranspose": "input channels per group x kernel size",
    "GlobalAveragePool": "the spatial size", "GlobalLpPool": "the spatial size", "AveragePool": "the kernel size",
    "LpPool": "the kernel size", "Softmax": "the axis length", "LogSoftmax": "the axis length",
    "LayerNormalization": "the normalized size", "InstanceNormalization": "the spatial size",
    "GroupNormalization": "channels per group x spatial size", "LpNormalization": "the axis length",
    "MeanVarianceNormalization": "the normalized size", "CumSum": "the axis length", "Det": "the matrix order",
    "LSTM": "input + hidden size (one gate's dot product)", "GRU": "input + hidden size (one gate's dot product)",
    "RNN": "input + hidden size (one step's dot product)", "STFT": "the frame length", "DFT": "the signal length",
    "Resize": "the interpolated neighbours", "RoiAlign": "4 x sampling ratio^2 bilinear samples",
    "Sum": "the inputs", "Mean": "the inputs", "ReduceMax": "none (a maximum rounds nothing)",
    "ReduceMin": "none (a minimum rounds nothing)",
}
