"""kit.suite.audit on real tasks, and on deliberately broken task folders (each must be caught, clearly)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import onnx
import polars as pl
import pytest
from onnx import helper

from kit.suite.audit import COLUMNS, audit, failed, write_calibration

TASKS = Path(__file__).resolve().parents[1] / "tasks"
FEW = ["abs_1d", "argmax_axis1_keep_4d", "topk_last_largest", "conv2d_3x3", "where_bcast_4d"]


def _copy_task(tmp_path: Path, category: str, task_id: str) -> Path:
    dst = tmp_path / category / task_id
    shutil.copytree(TASKS / category / task_id, dst)
    return dst


def _problems(df: pl.DataFrame, task_id: str) -> str:
    return df.filter(pl.col("task_id") == task_id)["problems"].item()


def test_audit_few_tasks_without_torch_or_native():
    df = audit(TASKS, ids=FEW, native=False, torch_check=False)
    assert df.columns == list(COLUMNS)
    assert df.height == len(FEW)
    assert df["passed"].all(), failed(df)
    assert df["structure_ok"].all() and df["ort_ok"].all() and df["mutants_ok"].all()
    assert df["ort_ms"].min() > 0
    assert df["torch_ok"].null_count() == len(FEW)  # not run
    assert failed(df) == []


@pytest.mark.torch
def test_audit_torch_matches_ort_on_few_tasks():
    pytest.importorskip("torch")
    df = audit(TASKS, ids=FEW, native=False, torch_check=True)
    assert df["torch_ok"].all(), failed(df)
    assert df["torch_max_abs_err"].max() < 1e-4


def test_two_node_model_is_caught(tmp_path):
    folder = _copy_task(tmp_path, "unary", "abs_1d")
    m = onnx.load(str(folder / "model.onnx"))
    node = m.graph.node[0]
    node.output[0] = "mid"
    m.graph.node.append(helper.make_node("Neg", ["mid"], ["y"]))
    onnx.save(m, str(folder / "model.onnx"))
    df = audit(tmp_path, native=False, torch_check=False)
    assert failed(df)[0][0] == "abs_1d"
    assert "graph has 2 nodes" in _problems(df, "abs_1d")
    assert df["structure_ok"].to_list() == [False]


def test_wrong_op_type_is_caught(tmp_path):
    folder = _copy_task(tmp_path, "unary", "abs_1d")
    m = onnx.load(str(folder / "model.onnx"))
    m.graph.node[0].op_type = "Neg"
    onnx.save(m, str(folder / "model.onnx"))
    df = audit(tmp_path, native=False, torch_check=False)
    assert "node is 'Neg', task.toml op_type is 'Abs'" in _problems(df, "abs_1d")


@pytest.mark.torch
def test_torch_disagreeing_with_ort_is_caught(tmp_path):
    pytest.importorskip("torch")
    folder = _copy_task(tmp_path, "unary", "abs_1d")
    src = (folder / "model.py").read_text()
    assert "return torch.abs(x)" in src
    (folder / "model.py").write_text(src.replace("return torch.abs(x)", "return torch.relu(x)"))
    df = audit(tmp_path, native=False, torch_check=True)
    assert df["torch_ok"].to_list() == [False]
    assert "torch model.py != ONNX Runtime" in _problems(df, "abs_1d")


@pytest.mark.torch
def test_parameter_without_initializer_is_caught(tmp_path):
    pytest.importorskip("torch")
    folder = _copy_task(tmp_path, "convolution", "conv2d_3x3")
    src = (folder / "model.py").read_text()
    (folder / "model.py").write_text(src.replace("self.conv = ", "self.renamed = "))
    (folder / "model.py").write_text((folder / "model.py").read_text().replace("self.conv(", "self.renamed("))
    df = audit(tmp_path, native=False, torch_check=True)
    assert "'renamed.weight' has no ONNX initializer" in _problems(df, "conv2d_3x3")


def test_too_loose_tolerance_lets_a_mutant_pass_and_is_caught(tmp_path):
    folder = _copy_task(tmp_path, "unary", "abs_1d")
    toml = (folder / "task.toml").read_text()
    (folder / "task.toml").write_text(re.sub(r"(?m)^atol = .*$", "atol = 100.0", toml, count=1))
    df = audit(tmp_path, native=False, torch_check=False)
    assert df["mutants_ok"].to_list() == [False]
    assert "the zero output passes verification" in _problems(df, "abs_1d")


def test_identity_mutant_is_caught(tmp_path):
    # Abs on non-negative inputs would be the identity: the audit must reject such inputs
    folder = _copy_task(tmp_path, "unary", "abs_1d")
    toml = (folder / "task.toml").read_text()
    (folder / "task.toml").write_text(toml.replace("low = -4.0", "low = 0.0"))
    df = audit(tmp_path, native=False, torch_check=False)
    assert "the identity of input x output passes verification" in _problems(df, "abs_1d")


@pytest.mark.slow
def test_native_wheel_columns_and_calibration_csv(tmp_path):
    _copy_task(tmp_path, "unary", "abs_1d")
    _copy_task(tmp_path, "logic", "bitwise_xor_int32")
    df = audit(tmp_path, native=True, torch_check=False)
    row = {r["task_id"]: r for r in df.to_dicts()}
    assert row["abs_1d"]["native_ok"] is True and row["abs_1d"]["native_ms"] > 0
    assert "UnaryOp" in row["abs_1d"]["native_runtime_op_types"]
    # MNN cannot convert BitwiseXor: a recorded fact, not an audit failure
    assert row["bitwise_xor_int32"]["native_convert_ok"] is False
    assert row["bitwise_xor_int32"]["passed"] is True
    out = write_calibration(df, tmp_path)
    back = pl.read_csv(out)
    assert back["task_id"].to_list() == ["abs_1d", "bitwise_xor_int32"]
