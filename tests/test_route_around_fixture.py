"""A candidate that routes around its task's target op type on the fixture engine is caught: its converter rewrite
of Sub (task ``fx_sub``, target op type ``BinaryOp``) runs no BinaryOp at all (UnaryOp Neg, a Raster stacking a
and -b, a ReduceSum: ``tests/fixture_engine/candidates/route_around/fx_sub/stacks_and_reduces``), so its outputs
are exact and pass verification, and only the proof that the kernel ran (:func:`kit.stages.timing.check_executed`)
stops it: ``verify_mismatch`` / ``not_executed``.  The honest rewrite (the ``correct`` sample, BinaryOp Mul and
Add) is ``ok`` in the same run.  ``fx_sub`` has no native side (the fixture converter has no Sub), so this is the
check's branch without one; the real-tree test (``tests/test_route_around_mnn.py``) covers the branch with one."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from conftest_fixture import FIXTURE_ROOT
from evalcfg import write_config

from kit.job.worker import setup_worker
from kit.mnn import runner as mrunner
from kit.outline.evaluate import evaluate
from kit.results.records import ErrorKind, Status
from kit.results.shards import scan
from kit.settings.config import load_config

pytestmark = pytest.mark.slow

TASK = "fx_sub"
ROUTE = FIXTURE_ROOT / "candidates" / "route_around" / TASK / "stacks_and_reduces"
HONEST = FIXTURE_ROOT / "candidates" / "sample" / TASK / "correct"


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory, fixture_engine_pristine, fixture_tasks_dir):
    tmp = tmp_path_factory.mktemp("route_around")
    shutil.copytree(HONEST, tmp / "candidates" / TASK / "honest")
    shutil.copytree(ROUTE, tmp / "candidates" / TASK / ROUTE.name)
    cfg_path = write_config(
        tmp / "cfg.toml", run_dir=tmp / "run", tasks_dir=fixture_tasks_dir, ids=[TASK], method="route_around",
        candidates=tmp / "candidates",
        mnn={"engine": "fixture", "source_dir": fixture_engine_pristine, "cache_dir": tmp / "cache"},
        build={"jobs": 2}, verify={"trials": 2}, timing={"warmup": 1, "iterations": 5, "rounds": 2})
    cfg = load_config(cfg_path)
    assert evaluate(cfg) == 0
    return cfg, {r["sample_id"]: r for r in scan(cfg.run.dir).collect().iter_rows(named=True)}


@pytest.fixture(scope="module")
def records(evaluated):
    return evaluated[1]


def test_a_converter_that_routes_around_binaryop_is_not_executed_though_its_outputs_are_exact(records):
    """The route-around's outputs equal ONNX Runtime's on every trial (so verification passes), and its record is
    ``verify_mismatch`` / ``not_executed`` naming the missing target type and what ran instead."""
    r = records[ROUTE.name]
    assert (r["status"], r["error_kind"]) == (Status.VERIFY_MISMATCH.value, ErrorKind.NOT_EXECUTED.value), r
    assert r["trials"] and all(t["ok"] for t in r["trials"]) and r["max_abs_err"] == 0.0
    msg = r["error_message"]
    assert "target op types ['BinaryOp'] did not execute" in msg, msg
    assert "it ran Raster x1, Reduction x1, UnaryOp x1 per forward" in msg, msg
    assert r["speedup"] is None and not r["candidate_samples_ms"]


def test_the_honest_rewrite_is_ok_in_the_same_run(records):
    """The ``correct`` sample's BinaryOps run: ``ok`` (timed alone: the task has no native side)."""
    r = records["honest"]
    assert r["status"] == Status.OK.value, r["error_message"]
    assert r["error_kind"] == ErrorKind.NO_NATIVE.value and r["candidate_samples_ms"]


def _stack_model(path, origin: str):
    """A model of one Raster stacking a [2, 3] and b [3] (b's row repeated) into y [2, 3, 2]: the regions of the
    route-around's rewrite, each read from the input its ``origin`` names."""
    path.write_text("FIXMODEL 1\ninput a float32 2 2 3\ninput b float32 1 3\n"
                    "op Raster stack 2 a b 1 y 3 i shape 3 2 3 2 "
                    "i region 22 0 0 3 1 0 0 6 2 1 2 3 0 0 0 1 1 0 6 2 1 2 3 "
                    f"i origin 2 {origin}\noutput y\nend\n")
    return path


def test_a_raster_reads_each_region_from_the_input_its_origin_names(evaluated, tmp_path):
    """The engine's route (MNN's Region::origin): regions of several inputs, exact; an origin past the Raster's
    inputs is refused before anything runs."""
    worker = setup_worker(evaluated[0])
    try:
        runner = worker.native.runner
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        b = np.array([10, 20, 30], np.float32)
        res = mrunner.run_model(runner, _stack_model(tmp_path / "ok.fixmodel", "0 1"), {"a": a, "b": b}, ["y"],
                                scratch=tmp_path / "ok")
        assert res.ok, res.error
        np.testing.assert_array_equal(res.outputs["y"], np.stack([a, np.broadcast_to(b, a.shape)], axis=-1))
        bad = mrunner.run_model(runner, _stack_model(tmp_path / "bad.fixmodel", "0 2"), {"a": a, "b": b}, ["y"],
                                scratch=tmp_path / "bad")
        assert not bad.ok and "onResize failed for Raster 'stack'" in bad.error, bad.error
    finally:
        worker.workspace.release()
