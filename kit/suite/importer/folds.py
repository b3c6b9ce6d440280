"""Exact graph rewrites of our own, for what the exporter writes around a target op and onnxscript's rules do not
fold: a scalar scale or a bias around ``Gemm`` (``alpha * (A @ B) + beta * C`` exports as Gemm, Mul, Add), two
reductions of one kind in a row (``x.sum((2, 3)).sum(1)``), an ``Expand`` to an all-ones shape (``x.repeat``).

Each fold takes and returns an ``onnx.ModelProto`` (a copy when it changed) with a step description ("" when it
did not apply); :func:`fold_all` applies them until none does.  Whether a fold kept the results is checked by
:func:`kit.suite.importer.reduce.reduce_graph` (ONNX Runtime, exported graph vs reduced)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

#: reductions whose two successive applications over disjoint axes are one over their union
MERGEABLE_REDUCTIONS = frozenset({"ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"})


def _const(model: onnx.ModelProto, name: str) -> np.ndarray | None:
    """The value of tensor ``name`` when it is an initializer, or a ConstantOfShape of one; else None."""
    for init in model.graph.initializer:
        if init.name == name:
            return numpy_helper.to_array(init)
    for n in model.graph.node:
        if n.op_type == "ConstantOfShape" and n.output[0] == name:
            shape = _const(model, n.input[0])
            value = next((numpy_helper.to_array(a.t) for a in n.attribute if a.name == "value"),
                         np.zeros(1, np.float32))
            return None if shape is None else np.full(shape.astype(np.int64), value.reshape(-1)[0])
    return None


def _scalar(model: onnx.ModelProto, name: str) -> float | None:
    v = _const(model, name)
    return float(v.reshape(-1)[0]) if v is not None and v.size == 1 else None


def _producer(model: onnx.ModelProto, name: str) -> onnx.NodeProto | None:
    return next((n for n in model.graph.node if name in n.output), None)


def _consumers(model: onnx.ModelProto, name: str) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if name in n.input]


def _rank(model: onnx.ModelProto, name: str) -> int | None:
    inferred = onnx.shape_inference.infer_shapes(model)
    for vi in list(inferred.graph.input) + list(inferred.graph.value_info) + list(inferred.graph.output):
        if vi.name == name and vi.type.tensor_type.HasField("shape"):
            return len(vi.type.tensor_type.shape.dim)
    return None


def _attrs(node: onnx.NodeProto) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _replace(model: onnx.ModelProto, gone: list[onnx.NodeProto], new: list[onnx.NodeProto]) -> onnx.ModelProto:
    """A copy of ``model`` with the nodes ``gone`` removed and ``new`` put where the last of them stood (its
    inputs are all made by then), initializers nothing reads any more dropped."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    nodes: list[onnx.NodeProto] = []
    at = None
    for n in model.graph.node:
        if any(n == g for g in gone):
            at = len(nodes)
        else:
            copy = onnx.NodeProto()
            copy.CopyFrom(n)
            nodes.append(copy)
    at = len(nodes) if at is None else at
    nodes[at:at] = new
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    used = {i for n in out.graph.node for i in n.input}
    inits = [i for i in out.graph.initializer if i.name in used]
    del out.graph.initializer[:]
    out.graph.initializer.extend(inits)
    return out


def _gemm(gemm: onnx.NodeProto, inputs: list[str], output: str, alpha: float, beta: float) -> onnx.NodeProto:
    attrs = {**_attrs(gemm), "alpha": alpha, "beta": beta}
    return helper.make_node("Gemm", inputs, [output], name=gemm.name or "Gemm_0", **attrs)


def fold_gemm_scale(model: onnx.ModelProto) -> tuple[onnx.ModelProto, str]:
    """``Mul(Gemm(A, B[, C]), s)`` (s a one-element constant) -> Gemm with alpha*s (and beta*s)."""
    for mul in model.graph.node:
        if mul.op_type != "Mul" or len(mul.input) != 2:
            continue
        for k in (0, 1):
            gemm, s = _producer(model, mul.input[k]), _scalar(model, mul.input[1 - k])
            if gemm is None or gemm.op_type != "Gemm" or s is None or len(_consumers(model, gemm.output[0])) != 1:
                continue
            a = _attrs(gemm)
            has_c = len(gemm.input) > 2 and bool(gemm.input[2])
            beta = float(a.get("beta", 1.0)) * (s if has_c else 1.0)
            new = _gemm(gemm, list(gemm.input), mul.output[0], float(a.get("alpha", 1.0)) * s, beta)
            return _replace(model, [gemm, mul], [new]), f"scalar Mul {s:g} folded into Gemm alpha/beta"
    return model, ""


def fold_gemm_bias_scale(model: onnx.ModelProto) -> tuple[onnx.ModelProto, str]:
    """``Gemm(A, B, Mul(C, s))`` (s a one-element constant, the Mul used only there) -> Gemm with beta*s."""
    for gemm in model.graph.node:
        if gemm.op_type != "Gemm" or len(gemm.input) < 3 or not gemm.input[2]:
            continue
        mul = _producer(model, gemm.input[2])
        if mul is None or mul.op_type != "Mul" or len(_consumers(model, mul.output[0])) != 1:
            continue
        for k in (0, 1):
            s = _scalar(model, mul.input[1 - k])
            if s is not None:
                a = _attrs(gemm)
                new = _gemm(gemm, [gemm.input[0], gemm.input[1], mul.input[k]], gemm.output[0],
                            float(a.get("alpha", 1.0)), float(a.get("beta", 1.0)) * s)
                return _replace(model, [mul, gemm], [new]), f"scalar Mul {s:g} of Gemm's C folded into beta"
    return model, ""


def fold_gemm_bias(model: onnx.ModelProto) -> tuple[onnx.ModelProto, str]:
    """``Add(Gemm(A, B), C)`` (a Gemm without C, used only there) -> ``Gemm(A, B, C)`` with beta 1 (Gemm's C
    broadcasts one way to [M, N]; a C that does not is refused by the checker or by ONNX Runtime)."""
    for add in model.graph.node:
        if add.op_type != "Add" or len(add.input) != 2:
            continue
        for k in (0, 1):
            gemm = _producer(model, add.input[k])
            if (gemm is None or gemm.op_type != "Gemm" or (len(gemm.input) > 2 and gemm.input[2])
                    or len(_consumers(model, gemm.output[0])) != 1):
                continue
            a = _attrs(gemm)
            new = _gemm(gemm, [gemm.input[0], gemm.input[1], add.input[1 - k]], add.output[0],
                        float(a.get("alpha", 1.0)), 1.0)
            return _replace(model, [gemm, add], [new]), "Add of a bias folded into Gemm's C"
    return model, ""


def _axes(model: onnx.ModelProto, node: onnx.NodeProto) -> list[int] | None:
    if len(node.input) > 1 and node.input[1]:
        v = _const(model, node.input[1])
        return None if v is None else [int(x) for x in v.reshape(-1)]
    return _attrs(node).get("axes")


def merge_reductions(model: onnx.ModelProto) -> tuple[onnx.ModelProto, str]:
    """``R(R(x, axes1), axes2)`` of one kind in :data:`MERGEABLE_REDUCTIONS`, the same ``keepdims``, the inner
    used only there -> one ``R(x, axes1 + axes2 mapped back to x's axes)``."""
    for outer in model.graph.node:
        inner = _producer(model, outer.input[0]) if outer.op_type in MERGEABLE_REDUCTIONS else None
        if inner is None or inner.op_type != outer.op_type or len(_consumers(model, inner.output[0])) != 1:
            continue
        keep = int(_attrs(inner).get("keepdims", 1))
        a1, a2, rank = _axes(model, inner), _axes(model, outer), _rank(model, inner.input[0])
        if keep != int(_attrs(outer).get("keepdims", 1)) or not a1 or not a2 or rank is None:
            continue
        first = sorted({a % rank for a in a1})
        left = list(range(rank)) if keep else [d for d in range(rank) if d not in first]
        second = {left[a % len(left)] for a in a2}
        if second & set(first):
            continue
        axes = sorted(set(first) | second)
        name = f"{outer.output[0]}_axes"
        init = numpy_helper.from_array(np.array(axes, np.int64), name)
        new = helper.make_node(outer.op_type, [inner.input[0], name], [outer.output[0]], name=outer.name or "R_0",
                               keepdims=keep)
        out = _replace(model, [inner, outer], [new])
        out.graph.initializer.append(init)
        return out, f"{outer.op_type} over {first} then over {sorted(a % len(left) for a in a2)} merged: axes {axes}"
    return model, ""


def drop_ones_expand(model: onnx.ModelProto) -> tuple[onnx.ModelProto, str]:
    """``Expand(x, shape)`` with a constant all-ones ``shape`` no longer than x's rank is x itself: dropped."""
    for ex in model.graph.node:
        if ex.op_type != "Expand":
            continue
        shape = _const(model, ex.input[1])
        if shape is None or not np.all(shape == 1):
            continue
        rank = _rank(model, ex.input[0])  # shape inference: only for an all-ones Expand
        if rank is None or shape.size > rank:
            continue
        src, dst = ex.input[0], ex.output[0]
        out = _replace(model, [ex], [])
        outputs = {o.name for o in out.graph.output}
        if dst in outputs:  # the graph's output keeps its name: rename the producer's output instead
            prod = next((n for n in out.graph.node if src in n.output), None)
            if prod is None:
                continue
            prod.output[list(prod.output).index(src)] = dst
            for n in out.graph.node:
                n.input[:] = [dst if i == src else i for i in n.input]
        else:
            for n in out.graph.node:
                n.input[:] = [src if i == dst else i for i in n.input]
        out = _replace(out, [n for n in out.graph.node if n.op_type == "ConstantOfShape"
                             and not _consumers(out, n.output[0])], [])
        return out, f"Expand to an all-ones shape {shape.astype(int).tolist()} dropped"
    return model, ""


FOLDS: tuple[Callable[[onnx.ModelProto], tuple[onnx.ModelProto, str]], ...] = (
    fold_gemm_scale, fold_gemm_bias_scale, fold_gemm_bias, merge_reductions, drop_ones_expand)


def fold_all(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    """Apply :data:`FOLDS` until none applies (at most 8 rounds); returns the model and the steps taken."""
    steps: list[str] = []
    for _ in range(8):
        changed = False
        for fold in FOLDS:
            model, step = fold(model)
            if step:
                steps.append(step)
                changed = True
        if not changed:
            break
    return model, steps
