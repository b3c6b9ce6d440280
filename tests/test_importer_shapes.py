"""Given ONNX models whose graph inputs set a shape (TopK's K) or whose opset is older than the kit's (GridSample
at opset 16, ``mode = "bilinear"``, renamed ``linear`` in opset 20): imported so that the task's outputs are the
ones every verification gets, then audited."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from kit.suite.importer import Options, find_sources, import_sources
from kit.suite.importer.assemble import PAPER_TOLERANCE
from kit.suite.importer.onnxsrc import sample_feeds
from kit.suite.importer.shapeinputs import fix_shape_inputs
from kit.suite.tasks import load_task

pytest.importorskip("torch")
pytestmark = [pytest.mark.torch]


def _save(g: onnx.GraphProto, opset: int, path: Path) -> Path:
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def _topk_k_input(path: Path) -> Path:
    g = helper.make_graph([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1)], "topk_k_input",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16]),
                           helper.make_tensor_value_info("k", TensorProto.INT64, [1])],
                          [helper.make_tensor_value_info("v", TensorProto.FLOAT, [4, None]),
                           helper.make_tensor_value_info("i", TensorProto.INT64, [4, None])])
    return _save(g, 13, path)


def _grid_sample_16(path: Path) -> Path:
    g = helper.make_graph([helper.make_node("GridSample", ["x", "grid"], ["y"], mode="bilinear")], "grid_sample16",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8, 8]),
                           helper.make_tensor_value_info("grid", TensorProto.FLOAT, [1, 6, 6, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 6, 6])])
    return _save(g, 16, path)


def test_a_shape_setting_input_becomes_a_constant_of_a_valid_value(tmp_path):
    model = onnx.load(_topk_k_input(tmp_path / "t.onnx"))
    specs, feeds = sample_feeds(model, 0)
    feeds["k"] = np.array([0], dtype=np.int64)  # the default integer draw may give 0: no valid K
    left, kept, notes = fix_shape_inputs(model, specs, feeds)
    assert [s.name for s in left] == ["x"] and set(kept) == {"x"}
    assert [i.name for i in model.graph.input] == ["x"]
    k = next(i for i in model.graph.initializer if i.name == "k")
    assert onnx.numpy_helper.to_array(k).tolist() == [1] and "TopK input 1" in notes[0]


@pytest.mark.slow
def test_k_as_input_topk_and_an_opset_16_grid_sample_import_and_pass_the_audit(tmp_path):
    models = [_topk_k_input(tmp_path / "topk_k_input.onnx"), _grid_sample_16(tmp_path / "grid_sample16.onnx")]
    out = tmp_path / "out"
    report = import_sources(find_sources(models), out, Options(probe_native=False), jobs=1, n_test=0)
    assert not report.left_out, report.left_out
    topk = load_task(next(out.rglob("topk_k_input")))
    assert [i.name for i in topk.inputs] == ["x"] and topk.outputs[0].shape[0] == 4
    assert any("fixed to" in e for e in topk.source.input_evidence)
    # declared as the built-in suite's are, and at the paper's pipelines' tolerance with its reason
    assert [(e.name, e.inputs) for e in topk.edges] == [("ties", ["x"]), ("denormals", ["x"])]
    assert (topk.tolerance.atol, topk.tolerance.rtol) == (PAPER_TOLERANCE, PAPER_TOLERANCE) == (1e-2, 1e-2)
    assert "--testdir" in topk.tolerance.reason and topk.tolerance.method == "paper"
    grid = onnx.load(str(next(out.rglob("grid_sample16")) / "model.onnx"))
    assert [a.s for a in grid.graph.node[0].attribute if a.name == "mode"] == [b"linear"]
    from kit.suite.audit import audit, failed

    df = audit(out, native=False)
    assert df.height == 2 and failed(df) == [], failed(df)


@pytest.mark.slow
def test_widened_gather_elements_indices_cover_the_negative_half(tmp_path):
    g = helper.make_graph([helper.make_node("GatherElements", ["x", "idx"], ["y"], axis=1)], "gather_elements_neg",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6]),
                           helper.make_tensor_value_info("idx", TensorProto.INT64, [4, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])])
    src = _save(g, 20, tmp_path / "gather_elements_neg.onnx")
    out = tmp_path / "out"
    report = import_sources(find_sources([src]), out, Options(probe_native=False, widen_inputs=True), jobs=1, n_test=0)
    assert not report.left_out, report.left_out
    task = load_task(next(out.rglob("gather_elements_neg")))
    idx = next(i for i in task.inputs if i.name == "idx")
    assert (idx.low, idx.high) == (-6, 5) and task.source.inputs_widened
    assert task.edges == []  # the distribution covers the negative indices already: no edge set for them
    from kit.suite.audit import audit, failed

    assert failed(audit(out, native=False)) == []  # ORT and the reference take negative indices alike


def test_widening_covers_gather_nd_and_one_hot_indices_negatives_included():
    from onnx import numpy_helper

    from kit.suite.importer.shapeinputs import bound_indices, widen_indices
    from kit.suite.tasks import TensorSpec

    g = helper.make_graph(
        [helper.make_node("GatherND", ["x", "nd"], ["y"]), helper.make_node("OneHot", ["oh", "depth", "vals"], ["z"])],
        "indices", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 5, 3]),
                    helper.make_tensor_value_info("nd", TensorProto.INT64, [4, 2]),
                    helper.make_tensor_value_info("oh", TensorProto.INT64, [6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [6, 7])],
        [numpy_helper.from_array(np.array([7], np.int64), "depth"),
         numpy_helper.from_array(np.array([0, 1], np.float32), "vals")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    specs = [TensorSpec(name="x", shape=[5, 5, 3]),
             TensorSpec(name="nd", shape=[4, 2], dtype="int64", distribution="integers", low=0, high=9),
             TensorSpec(name="oh", shape=[6], dtype="int64", distribution="integers", low=0, high=9)]
    bounded = {s.name: (s.low, s.high) for s in bound_indices(model, specs)}
    assert bounded["nd"] == (0, 4) and bounded["oh"] == (0, 6)  # each index tuple names two axes of 5; depth 7
    widened, notes = widen_indices(model, specs)
    assert {s.name: (s.low, s.high) for s in widened if s.dtype == "int64"} == {"nd": (-5, 4), "oh": (-7, 6)}
    assert len(notes) == 2 and "--widen-inputs" in notes[0]


@pytest.mark.slow
def test_a_dynamic_dimension_is_fixed_with_dim_and_a_bad_one_is_named(tmp_path, capsys):
    from kit.cli import main

    g = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=1)], "softmax_dyn",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])])
    src = _save(g, 20, tmp_path / "softmax_dyn.onnx")
    report = import_sources(find_sources([src]), tmp_path / "none", Options(probe_native=False), jobs=1, n_test=0)
    ((_, kind, why),) = report.left_out
    assert kind == "unsupported_input" and "--dim N=N" in why  # without --dim: the flag is named
    assert main(["tasks", "import", str(src), "--out", str(tmp_path / "q"), "--dim", "Q=8", "--no-native"]) == 2
    assert "--dim Q=8: no input of the ONNX models imported has a dimension named 'Q'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["tasks", "import", str(src), "--out", str(tmp_path / "bad"), "--dim", "N=eight"])
    assert exc.value.code == 2 and "--dim 'N=eight': give NAME=N" in capsys.readouterr().err
    out = tmp_path / "out"
    assert main(["tasks", "import", str(src), "--out", str(out), "--dim", "N=8", "--no-native"]) == 0
    task = load_task(next(out.rglob("softmax_dyn")))
    assert task.inputs[0].shape == [8, 16] and task.outputs[0].shape == [8, 16]
    assert "N: dynamic dimension fixed to 8 (--dim N=8)" in task.source.input_evidence
    assert [d.dim_value for d in onnx.load(str(task.onnx_path)).graph.input[0].type.tensor_type.shape.dim] == [8, 16]
    assert [(e.name, e.axis) for e in task.edges] == [("large_magnitude", None), ("size_one_axes", 1), ("empty_axes", 0)]
