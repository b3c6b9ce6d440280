"""Reduce an exported ONNX graph to the one node the problem is about, where that is exact.

:func:`reduce_graph` runs, in order: onnx_ir's Identity elimination; onnxscript's constant folding (shape
sub-graphs, casts of constants, ...); onnxscript's rewrite rules that remove no-op nodes (``Mul`` by 1,
``Cast`` to the same type, ``Reshape`` to the same shape, successive Reshape/Unsqueeze/Transpose, ...);
our own exact folds (:mod:`kit.suite.importer.folds`: a scalar ``Mul`` or a bias ``Add`` into ``Gemm``, two reductions
of one kind in a row into one, an ``Expand`` to an all-ones shape dropped); removal of unused nodes; constants
lifted to initializers.  Each step that changed the graph is named in :attr:`Reduced.steps`.  The reduced graph
must pass ``onnx.checker`` (full check) and give ONNX Runtime's outputs of the exported graph on the sample
inputs (atol 1e-6, rtol 1e-5, NaN where NaN); a graph left with more than one node is irreducible, unless all but one are shape-only helpers
(:data:`SHAPE_HELPERS`), which are kept and recorded.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import onnx

from kit.suite.importer.folds import fold_all
from kit.suite.importer.problem import ImportFailure

#: shape-only ops accepted around the target op when no exact rewrite removes them (a Squeeze of LSTM's
#: Y, a Reshape before an axis-less ArgMax); they are recorded in task.toml (``source.helper_ops``)
SHAPE_HELPERS = frozenset({"Squeeze", "Unsqueeze", "Reshape", "Flatten"})

#: tolerance of the reduced graph against the exported one (ONNX Runtime, sample inputs)
EXACT_ATOL, EXACT_RTOL = 1e-6, 1e-5


@dataclass(frozen=True)
class Reduced:
    model: onnx.ModelProto
    #: the op type of the one node left (the target op)
    target_op: str
    #: what was done, in order ("constant folding: removed Shape, Gather, Unsqueeze", ...)
    steps: list[str]
    #: op types of the exported graph's nodes
    exported_ops: list[str]
    #: shape-only helper nodes left around the target (op types, in graph order)
    helpers: list[str]


def _ops(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node]


def _removed(before: list[str], after: list[str]) -> str:
    gone = Counter(before) - Counter(after)
    return ", ".join(f"{op}" + (f" x{n}" if n > 1 else "") for op, n in sorted(gone.items()))


def _rules():
    from onnxscript.rewriter.rules import common as c

    return [c.add_0_rule, c.sub_0_rule, c.mul_by_1_rule, c.div_by_1_rule, c.dropout_inference_rule,
            c.dropout_zero_rule, c.no_op_cast_rule, c.cast_cast_rule, c.no_op_expand_rule, c.no_op_transpose_rule,
            c.transpose_transpose_rule, c.reshape_reshape_rule, c.unsqueeze_unsqueeze_rule,
            c.squeeze_reshape_1d_rule, c.materialize_reshape_shape_rule, c.flatten_to_reshape_rule]


def _ir_steps(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    """The onnx_ir / onnxscript passes of the module docstring, each recorded when it removed nodes."""
    import onnx_ir as ir
    import onnx_ir.passes.common as common
    from onnxscript.optimizer._constant_folding import FoldConstantsPass
    from onnxscript.rewriter import RewritePass

    passes = [("Identity elimination", common.IdentityEliminationPass()),
              ("constant folding", FoldConstantsPass(shape_inference=True, input_size_limit=1 << 20,
                                                     output_size_limit=1 << 24)),
              ("no-op rewrite rules", RewritePass(_rules())),
              ("unused nodes", common.RemoveUnusedNodesPass())]
    ir_model = ir.from_proto(model)
    steps = []
    for _ in range(2):
        for name, p in passes:
            before = [n.op_type for n in ir_model.graph]
            p(ir_model)
            after = [n.op_type for n in ir_model.graph]
            if before != after:
                steps.append(f"{name}: removed {_removed(before, after)}" if len(after) < len(before)
                             else f"{name}: {' '.join(before)} -> {' '.join(after)}")
    common.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0)(ir_model)
    return ir.to_proto(ir_model), steps


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Outputs of ``model`` on ``feeds`` (ONNX Runtime, CPU, one thread)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run([o.name for o in model.graph.output], feeds)


def same_outputs(a: list[np.ndarray], b: list[np.ndarray]) -> str:
    """"" when each pair agrees (shape, dtype, values within EXACT_*), else the first difference."""
    for k, (x, y) in enumerate(zip(a, b)):
        if x.shape != y.shape or x.dtype != y.dtype:
            return f"output {k}: {y.dtype}{list(y.shape)} instead of {x.dtype}{list(x.shape)}"
        if x.dtype.kind == "f" and not np.allclose(y, x, atol=EXACT_ATOL, rtol=EXACT_RTOL, equal_nan=True):
            return f"output {k}: values differ (max abs {float(np.nanmax(np.abs(y - x))):.3g})"
        if x.dtype.kind != "f" and not np.array_equal(x, y):
            return f"output {k}: values differ"
    return "" if len(a) == len(b) else f"{len(b)} outputs instead of {len(a)}"


def reduce_graph(raw: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> Reduced:
    """The reduced graph of ``raw`` (see the module docstring).

    Raises:
        ImportFailure: ``bad_model`` (ONNX Runtime cannot run the exported graph), ``irreducible`` (more than
            one node left, or a step changed the results: the message names the nodes or the difference).  A
            graph of one compute node plus helpers (:func:`_helpers`) keeps them, recorded.
    """
    exported = _ops(raw)
    try:
        ref = run_ort(raw, feeds)
    except Exception as exc:  # noqa: BLE001 - ORT raises several types
        raise ImportFailure("bad_model", f"ONNX Runtime cannot run the exported graph: {str(exc)[:300]}") from None
    model, steps = _ir_steps(raw)
    model, folded = fold_all(model)
    if folded:
        model, more = _ir_steps(model)  # what a fold left unused (ConstantOfShape, initializers)
        steps += folded + more
    ops = _ops(model)
    helper_nodes = _helpers(model)
    compute = [n.op_type for n in model.graph.node if n not in helper_nodes]
    if len(ops) > 1 and len(compute) == 1:
        helpers = [n.op_type for n in helper_nodes]
        steps.append(f"kept helpers around {compute[0]}: {' '.join(helpers)}")
    elif len(ops) != 1:
        raise ImportFailure("irreducible", f"{len(ops)} nodes left after reduction ({' '.join(ops)}; exported: "
                                           f"{' '.join(exported)})")
    try:
        onnx.checker.check_model(model, full_check=True)
        got = run_ort(model, feeds)
    except Exception as exc:  # noqa: BLE001
        raise ImportFailure("irreducible", f"the reduced graph is invalid: {str(exc)[:300]}") from None
    diff = same_outputs(ref, got)
    if diff:
        raise ImportFailure("irreducible", f"reduction changed the results ({diff}); steps: {'; '.join(steps)}")
    target = compute[0] if len(compute) == 1 else ops[0]
    # a graph of one shape-only node (a Reshape task) has that node as its target, not as a helper of itself
    helpers = [n.op_type for n in helper_nodes] if len(ops) > 1 else []
    return Reduced(model, target, steps, exported, helpers)


def _helpers(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """The helper nodes around the target: shape-only ones (:data:`SHAPE_HELPERS`), and a ``Cast`` of a graph
    input (what the exporter puts before a bool op fed a float tensor: ``torch.logical_not(randn)``)."""
    inputs = {i.name for i in model.graph.input}
    return [n for n in model.graph.node
            if n.op_type in SHAPE_HELPERS or (n.op_type == "Cast" and n.input[0] in inputs)]
