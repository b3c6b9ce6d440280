"""Edge input sets (kit.suite.edges): what each set draws, which tasks declare which, a kernel that takes the
last maximum on ties and one that runs off its buffers on an empty batch: ``ok`` on the distribution, its
``ties`` (``empty_axes``) set failed, native's passed (fixture engine)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest_fixture import FIXTURE_ROOT
from evalcfg import write_config

from kit.suite import edges
from kit.suite.inputs import make_inputs
from kit.suite.tasks import EdgeSpec, TaskError, load_suite, load_task

TASKS = Path(__file__).resolve().parent.parent / "tasks"


def _task(task_id: str):
    return next(t for t in load_suite(TASKS) if t.id == task_id)


def test_negative_indices_cover_the_legal_range_and_name_the_same_elements():
    task = _task("gather_elements_axis1")
    spec = next(e for e in task.edges if e.name == "negative_indices")
    assert spec.inputs == ["indices"]
    base = make_inputs(task, 3)["indices"]
    got = edges.edge_inputs(task, spec, 3)["indices"]
    s = 512  # the indexed axis
    assert got.min() >= -s and got.max() <= s - 1 and (got < 0).mean() > 0.4
    assert np.array_equal(np.where(got < 0, got + s, got), base)  # the same elements, counted from the end
    assert np.array_equal(edges.edge_inputs(task, spec, 3)["indices"], got)  # seeded


def test_ties_special_values_and_large_magnitude_draw_what_they_name():
    argmax = _task("argmax_last_2d")
    x = edges.edge_inputs(argmax, argmax.edges[0], 0)["x"]
    assert argmax.edges[0].name == "ties" and len(np.unique(x)) == edges.TIE_LEVELS
    assert ((x == x.max(axis=1, keepdims=True)).sum(axis=1) > 1).all()  # every row has tied maxima
    neg = _task("neg_2d")
    spec = next(e for e in neg.edges if e.name == "special_values")
    y = edges.edge_inputs(neg, spec, 0)[spec.inputs[0]]
    assert np.isnan(y).any() and np.isposinf(y).any() and np.isneginf(y).any()
    assert ((y == 0) & np.signbit(y)).any()
    softmax = next(t for t in load_suite(TASKS) if t.op_type == "Softmax")
    big = edges.edge_inputs(softmax, softmax.edges[0], 0)[softmax.edges[0].inputs[0]]
    assert softmax.edges[0].name == "large_magnitude" and np.abs(big).max() > 88.7


def test_the_built_in_suite_declares_edges_by_op_class():
    tasks = load_suite(TASKS)
    with_edges = [t for t in tasks if t.edges]
    assert len(with_edges) == 125
    for t in tasks:
        assert t.edges == edges.declare(t.op_type, t.inputs, onnx.load(str(t.onnx_path))), t.id
    assert {e.name for t in tasks for e in t.edges} == set(edges.EDGE_OPS)
    # constant indices are the model's own: the scatter task's only integer tensor is an initializer
    assert not any(e.name == "negative_indices" for e in _task("scatter_nd_rows").edges)


def test_denormals_are_subnormal_and_a_product_keeps_them_visible():
    tiny = np.float32(2.0**-126)  # the smallest normal float32
    log = _task("log_4d")
    (spec,) = [e for e in log.edges if e.name == "denormals"]
    x = edges.edge_inputs(log, spec, 0)["x"]
    assert ((x > 0) & (x < tiny)).all()  # positive distribution: positive subnormals only
    mm = _task("matmul_2d_rect")
    (spec,) = [e for e in mm.edges if e.name == "denormals"]
    got = edges.edge_inputs(mm, spec, 0)
    assert spec.inputs == ["a"] and (np.abs(got["a"]) < tiny).all() and (got["a"] < 0).any()
    assert np.array_equal(got["b"], make_inputs(mm, 0)["b"] * edges.DENORMAL_SCALE)  # the other factor scaled
    y = got["a"].astype(np.float64) @ got["b"].astype(np.float64)
    assert np.abs(y).max() > 1.0  # the exact products are normal: a flushing kernel's zeros fail any tolerance
    # Relu-like ops and sums: a flush changes the result by < 1.2e-38, so they get no set
    assert not [e for e in _task("relu_4d").edges if e.name == "denormals"]
    assert edges.declare("ReduceSum", [mm.inputs[0]]) == []


def test_a_large_factor_is_scaled_by_a_smaller_power_of_two_and_stays_finite():
    """A product's other factor of 4 or more would overflow at 2**126 (float32's max is below 2**128): it is
    scaled by the largest power of two that keeps it finite, every mantissa kept; a factor below 4 as before."""
    small = np.array([0.5, -3.9, 1.0], dtype=np.float32)
    assert np.array_equal(edges.scale_factor(small), small * edges.DENORMAL_SCALE)
    for big in (4.0, 7.9, 100.0, 3.0e38):
        x = np.array([1.0, -big, 0.25], dtype=np.float32)
        with np.errstate(over="raise"):
            got = edges.scale_factor(x)
        assert np.isfinite(got).all() and np.abs(got).max() >= np.float32(2.0**127)  # twice would overflow
        ratio = got.astype(np.float64) / x.astype(np.float64)
        assert len(set(ratio.tolist())) == 1 and math.log2(ratio[0]).is_integer()  # one power of two for all
    assert edges.declare("Gemm", _task("gemm_const_b").inputs) == []  # B is a constant: nothing to scale


def test_size_one_axes_cut_the_ops_axis_and_the_reference_takes_the_shape():
    from kit.suite.reference import run_reference

    softmax = _task("softmax_axis1_4d")
    (spec,) = [e for e in softmax.edges if e.name == "size_one_axes"]
    assert spec.axis == 1
    x = edges.edge_inputs(softmax, spec, 2)["x"]
    assert x.shape == (4, 1, 32, 64)
    assert any(np.array_equal(x, sl) for sl in np.split(make_inputs(softmax, 2)["x"], 64, axis=1))
    assert np.allclose(run_reference(softmax.onnx_path, {"x": x})["y"], 1.0)  # a softmax over one element
    total = _task("reduce_sum_all")  # reduces every axis: the last one is cut
    assert [e.axis for e in total.edges if e.name == "size_one_axes"] == [1]
    assert not [e for e in _task("topk_last_largest").edges if e.name == "size_one_axes"]  # K > 1 needs the axis
    assert [e.name for e in edges.declare("Softmax", softmax.inputs)] == ["large_magnitude"]  # no model, no axis


def test_empty_axes_cut_an_axis_the_op_does_not_work_along_and_the_reference_gives_an_empty_result():
    from kit.suite.reference import run_reference

    cases = {"exp_3d": (["x"], 0, {"y": (0, 256, 256)}),  # element-wise: the first axis
             "softmax_axis0_3d": (["x"], 1, {"y": (32, 0, 128)}),  # the op's axis is 0: the next one
             "reduce_max_axes024_5d": (["x"], 1, {"y": (0, 32)}),  # the first axis not reduced
             "sub_bcast_channel": (["a"], 0, {"y": (0, 64, 64, 64)}),  # b [1, 64, 1, 1] broadcasts to 0
             "transpose_3d_201": (["x"], 0, {"y": (32, 0, 64)})}
    for task_id, (names, axis, shapes) in cases.items():
        task = _task(task_id)
        (spec,) = [e for e in task.edges if e.name == "empty_axes"]
        assert (spec.inputs, spec.axis) == (names, axis), task_id
        got = edges.edge_inputs(task, spec, 0)
        assert all(got[n].shape[axis] == 0 for n in names)
        assert {k: v.shape for k, v in run_reference(task.onnx_path, got).items()} == shapes, task_id
    assert not [e for e in _task("reduce_sum_all").edges if e.name == "empty_axes"]  # every axis reduced
    assert not [e for e in _task("conv2d_3x3").edges if e.name == "empty_axes"]  # not an op class of the set


def test_an_edge_set_on_a_missing_or_wrong_input_is_refused(tmp_path):
    folder = tmp_path / "reduction" / "fx_argmax"
    shutil.copytree(FIXTURE_ROOT / "tasks" / "reduction" / "fx_argmax", folder)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace('inputs = ["x"]', 'inputs = ["nope"]'))
    with pytest.raises(TaskError, match=r"edges \(ties\): 'nope' is not an input"):
        load_task(folder)
    assert EdgeSpec(name="ties", inputs=["x"]).why == ""
    toml.write_text(toml.read_text().replace('inputs = ["nope"]', 'inputs = ["x"]\naxis = 1'))
    with pytest.raises(TaskError, match=r"axis is given for size_one_axes and empty_axes, and only for them"):
        load_task(folder)
    toml.write_text(toml.read_text().replace('name = "ties"', 'name = "size_one_axes"').replace("axis = 1", "axis = 7"))
    with pytest.raises(TaskError, match=r"axis 7 is not an axis of 'x'"):
        load_task(folder)


@pytest.mark.slow
def test_a_kernel_taking_the_last_maximum_fails_the_ties_set_only(tmp_path, fixture_engine_pristine, fixture_shared_cache,
                                                                   fixture_tasks_dir, fixture_candidates_dir):
    from kit.outline.evaluate import evaluate
    from kit.results.shards import scan
    from kit.settings.config import load_config

    cands = tmp_path / "candidates" / "fx_argmax"
    shutil.copytree(fixture_candidates_dir / "sample" / "fx_argmax" / "correct", cands / "correct")
    shutil.copytree(FIXTURE_ROOT / "candidates" / "edges" / "fx_argmax" / "last_on_ties", cands / "last_on_ties")
    cfg = load_config(write_config(
        tmp_path / "cfg.toml", run_dir=tmp_path / "run", tasks_dir=fixture_tasks_dir, ids=["fx_argmax"],
        method="edges", candidates=tmp_path / "candidates",
        mnn={"engine": "fixture", "source_dir": fixture_engine_pristine, "cache_dir": fixture_shared_cache},
        build={"jobs": 2}, verify={"trials": 2, "extra_threads": []}, timing={"enabled": False}))
    assert evaluate(cfg) == 0
    got = {r["sample_id"]: r for r in scan(cfg.run.dir).collect().iter_rows(named=True)}
    assert got["correct"]["status"] == got["last_on_ties"]["status"] == "ok"  # both right on the distribution
    assert got["correct"]["edge_sets"] == [{"name": "ties", "ok": True, "native_ok": True, "reason": ""}]
    (ties,) = got["last_on_ties"]["edge_sets"]
    assert (ties["name"], ties["ok"], ties["native_ok"]) == ("ties", False, True)
    assert "y:" in ties["reason"]


@pytest.mark.slow
def test_a_kernel_running_off_an_empty_batch_fails_the_empty_axes_set_only(
        tmp_path, fixture_engine_pristine, fixture_shared_cache, fixture_tasks_dir, fixture_candidates_dir):
    import polars as pl

    from kit.outline.evaluate import evaluate
    from kit.results.shards import scan
    from kit.score import metrics
    from kit.settings.config import load_config
    from kit.suite.tomlw import dumps_mapping

    tasks = tmp_path / "tasks"
    shutil.copytree(fixture_tasks_dir / "unary" / "fx_exp", tasks / "unary" / "fx_exp")
    toml = tasks / "unary" / "fx_exp" / "task.toml"
    task = load_task(toml.parent)
    declared = [e for e in edges.declare(task.op_type, task.inputs, onnx.load(str(task.onnx_path)))
                if e.name == "empty_axes"]
    toml.write_text(toml.read_text() + "\n" + dumps_mapping({"edges": edges.edge_table(declared)}))
    assert [(e.name, e.axis) for e in load_task(toml.parent).edges] == [("empty_axes", 0)]
    cands = tmp_path / "candidates" / "fx_exp"
    shutil.copytree(fixture_candidates_dir / "sample" / "fx_exp" / "correct", cands / "correct")
    shutil.copytree(FIXTURE_ROOT / "candidates" / "edges" / "fx_exp" / "last_apart", cands / "last_apart")
    cfg = load_config(write_config(
        tmp_path / "cfg.toml", run_dir=tmp_path / "run", tasks_dir=tasks, ids=["fx_exp"],
        method="edges", candidates=tmp_path / "candidates",
        mnn={"engine": "fixture", "source_dir": fixture_engine_pristine, "cache_dir": fixture_shared_cache},
        build={"jobs": 2}, verify={"trials": 2, "extra_threads": []}, timing={"enabled": False}))
    assert evaluate(cfg) == 0
    records = scan(cfg.run.dir).collect()
    got = {r["sample_id"]: r for r in records.iter_rows(named=True)}
    assert got["correct"]["status"] == got["last_apart"]["status"] == "ok"  # both right on the distribution
    assert got["correct"]["edge_sets"] == [{"name": "empty_axes", "ok": True, "native_ok": True, "reason": ""}]
    (empty,) = got["last_apart"]["edge_sets"]
    assert (empty["name"], empty["ok"], empty["native_ok"]) == ("empty_axes", False, True), empty
    assert "signal 11" in empty["reason"]  # SIGSEGV: n - 1 wrapped to SIZE_MAX
    frame = pl.DataFrame({"task_id": ["fx_exp"], "category": ["unary"], "split": ["train"]})
    for sample, strict in (("correct", 1.0), ("last_apart", 0.0)):
        one = records.filter(pl.col("sample_id") == sample)
        row = metrics.summary(one, frame, ps=(1.0,)).row(0, named=True)
        assert (row["fcr"], row["fcr_strict"]) == (1.0, strict), sample
    failed = metrics.per_task(records.filter(pl.col("sample_id") == "last_apart"), frame)["failed_edges"]
    assert failed.to_list() == [["empty_axes"]]
