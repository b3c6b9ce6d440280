"""kit.stages.timing.check_executed: the proof that a candidate's kernel ran (its target op types execute in its
model as they do in the native one), on the suite's own tasks."""

from __future__ import annotations

from pathlib import Path

import pytest

from kit.results.outcomes import StageFailure
from kit.results.records import ErrorKind, Status
from kit.stages.timing import check_executed
from kit.suite.tasks import load_suite

TASKS = {t.id: t for t in load_suite(Path(__file__).resolve().parents[1] / "tasks", "all")}


def test_the_target_op_types_running_is_enough_however_often():
    layernorm = TASKS["layernorm_last_3d"]  # targets: LayerNorm
    check_executed(layernorm, {"LayerNorm": 1}, {"LayerNorm": 1})
    where = TASKS["where_bcast_4d"]  # targets: Raster, Select; a geometry that needs one Raster fewer is fine
    check_executed(where, {"Raster": 1, "Select": 1}, {"Raster": 3, "Select": 1})


def test_a_candidate_whose_target_op_type_never_ran_is_caught_naming_what_ran_instead():
    layernorm = TASKS["layernorm_last_3d"]
    with pytest.raises(StageFailure) as exc:  # a geometry that decomposed LayerNorm into native kernels
        check_executed(layernorm, {"Reduction": 2, "BinaryOp": 4, "UnaryOp": 1}, {"LayerNorm": 1})
    f = exc.value
    assert (f.status, f.kind) == (Status.VERIFY_MISMATCH, ErrorKind.NOT_EXECUTED)
    assert "['LayerNorm']" in f.message and "LayerNorm x1" in f.message and "Reduction x2" in f.message


def test_only_target_types_the_native_model_runs_are_required():
    where = TASKS["where_bcast_4d"]
    check_executed(where, {"Select": 1}, {"Select": 1})  # the native model runs no Raster: none required
    with pytest.raises(StageFailure, match="Select"):
        check_executed(where, {"Raster": 2}, {"Raster": 2, "Select": 1})


def test_without_a_native_side_one_target_type_must_run():
    task = TASKS["instancenorm_3d"]  # targets: LayerNorm, Scale
    check_executed(task, {"Scale": 1}, None)
    with pytest.raises(StageFailure, match="did not execute"):
        check_executed(task, {"Cast": 2}, None)


def test_tasks_that_name_no_op_type_are_not_checked():
    star = next(t for t in TASKS.values() if t.mnn_op_types == ["*"])
    check_executed(star, {"Raster": 1}, {"BinaryOp": 3})
