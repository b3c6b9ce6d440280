"""The importer's own exact folds (kit.suite.importer.folds) on ONNX graphs of our own, each through
:func:`kit.suite.importer.reduce.reduce_graph` (which checks the reduced graph against the original on ONNX Runtime):
what the exporter writes for ``alpha * (A @ B) + C``, ``addmm(beta * C, A, B)``, ``x.sum((2, 3)).sum(1)``,
``x.repeat(1, 2, 3)`` and ``logical_not(float x)`` becomes one target node (plus a declared Cast helper)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

pytest.importorskip("onnx_ir", reason="the importer's graph tools come with the tasks extra (pip install -e '.[tasks]')")

from kit.suite.importer.problem import ImportFailure
from kit.suite.importer.reduce import reduce_graph

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(nodes, inputs, outputs, inits=()) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=10)


def _feeds(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for i in model.graph.input:
        shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
        out[i.name] = rng.standard_normal(shape).astype(np.float32)
    return out


def _attrs(node) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def test_a_scale_and_a_bias_around_gemm_fold_into_alpha_and_c():
    m = _model([helper.make_node("Gemm", ["a", "b"], ["p"]), helper.make_node("Mul", ["p", "half"], ["q"]),
                helper.make_node("Add", ["q", "c"], ["y"])],
               [("a", F, [8, 16]), ("b", F, [16, 4]), ("c", F, [1, 4])], [("y", F, [8, 4])],
               [("half", np.array(0.5, np.float32))])
    red = reduce_graph(m, _feeds(m))
    (node,) = red.model.graph.node
    assert (node.op_type, list(node.input), _attrs(node)["alpha"], _attrs(node)["beta"]) == ("Gemm", ["a", "b", "c"],
                                                                                            0.5, 1.0)
    assert red.steps[-2:] == ["scalar Mul 0.5 folded into Gemm alpha/beta", "Add of a bias folded into Gemm's C"]


def test_a_scaled_c_of_gemm_folds_into_beta():
    m = _model([helper.make_node("Mul", ["c", "s"], ["cs"]), helper.make_node("Gemm", ["a", "b", "cs"], ["y"])],
               [("a", F, [8, 16]), ("b", F, [16, 4]), ("c", F, [1, 4])], [("y", F, [8, 4])],
               [("s", np.array([0.25], np.float32))])
    red = reduce_graph(m, _feeds(m))
    (node,) = red.model.graph.node
    assert list(node.input) == ["a", "b", "c"] and _attrs(node)["beta"] == 0.25
    assert not red.model.graph.initializer  # the scale is gone with its Mul


@pytest.mark.parametrize("keepdims, second, merged", [(0, [1], [1, 2, 3]), (1, [1], [1, 2, 3]), (0, [-1], [1, 2, 3])])
def test_two_reductions_of_one_kind_merge_into_one(keepdims, second, merged):
    m = _model([helper.make_node("ReduceSum", ["x", "a1"], ["s"], keepdims=keepdims),
                helper.make_node("ReduceSum", ["s", "a2"], ["y"], keepdims=keepdims)],
               [("x", F, [2, 6, 5, 4])], [("y", F, [2] + [1] * 3 * keepdims)],
               [("a1", np.array([2, 3], np.int64)), ("a2", np.array(second, np.int64))])
    red = reduce_graph(m, _feeds(m))
    (node,) = red.model.graph.node
    axes = numpy_helper.to_array(next(i for i in red.model.graph.initializer if i.name == node.input[1]))
    assert node.op_type == "ReduceSum" and axes.tolist() == merged and _attrs(node)["keepdims"] == keepdims


def test_a_sum_then_a_max_do_not_merge():
    m = _model([helper.make_node("ReduceSum", ["x", "a1"], ["s"], keepdims=0),
                helper.make_node("ReduceMax", ["s", "a2"], ["y"], keepdims=0)],
               [("x", F, [2, 6, 5])], [("y", F, [2])],
               [("a1", np.array([2], np.int64)), ("a2", np.array([1], np.int64))])
    with pytest.raises(ImportFailure, match=r"2 nodes left after reduction \(ReduceSum ReduceMax"):
        reduce_graph(m, _feeds(m))


def test_an_expand_to_ones_before_tile_is_dropped():
    ones = helper.make_tensor("one", I64, [1], [1])
    m = _model([helper.make_node("ConstantOfShape", ["three"], ["shape"], value=ones),
                helper.make_node("Expand", ["x", "shape"], ["e"]), helper.make_node("Tile", ["e", "reps"], ["y"])],
               [("x", F, [4, 3, 2])], [("y", F, [4, 6, 6])],
               [("three", np.array([3], np.int64)), ("reps", np.array([1, 2, 3], np.int64))])
    red = reduce_graph(m, _feeds(m))
    assert [n.op_type for n in red.model.graph.node] == ["Tile"] and red.model.graph.node[0].input[0] == "x"


def test_an_expand_that_broadcasts_is_kept():
    m = _model([helper.make_node("Expand", ["x", "shape"], ["e"]), helper.make_node("Tile", ["e", "reps"], ["y"])],
               [("x", F, [1, 3])], [("y", F, [4, 6])],
               [("shape", np.array([2, 3], np.int64)), ("reps", np.array([2, 2], np.int64))])
    with pytest.raises(ImportFailure, match="2 nodes left"):
        reduce_graph(m, _feeds(m))


def test_a_cast_of_a_graph_input_is_a_declared_helper_but_not_elsewhere():
    m = _model([helper.make_node("Cast", ["x"], ["b"], to=TensorProto.BOOL), helper.make_node("Not", ["b"], ["y"])],
               [("x", F, [3, 5])], [("y", TensorProto.BOOL, [3, 5])])
    red = reduce_graph(m, _feeds(m))
    assert (red.target_op, red.helpers) == ("Not", ["Cast"])
    inner = _model([helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Cast", ["n"], ["y"], to=TensorProto.INT32)],
                   [("x", F, [3, 5])], [("y", TensorProto.INT32, [3, 5])])
    with pytest.raises(ImportFailure, match="2 nodes left"):
        reduce_graph(inner, _feeds(inner))


def test_a_lone_reshape_is_the_target_not_a_helper_of_itself():
    m = _model([helper.make_node("Reshape", ["x", "shape"], ["y"])], [("x", F, [2, 6])], [("y", F, [3, 4])],
               [("shape", np.array([3, 4], np.int64))])
    red = reduce_graph(m, _feeds(m))
    assert (red.target_op, red.helpers) == ("Reshape", [])
