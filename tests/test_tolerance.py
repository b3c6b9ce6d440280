"""Per-task tolerances derived from independent references and the accumulation length (kit.suite.tolerance), on
small tasks of our own; the audit's flag of a native error over the tolerance; task.toml files without the new
fields still load."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import numpy as np
import pytest

from kit.cli import main
from kit.suite import audit as saudit
from kit.suite.builtin import apply_tolerances, task_files
from kit.suite.inputs import make_inputs
from kit.suite.reference import run_reference
from kit.suite.spec import In, Out, TaskDef
from kit.suite.tasks import PAPER_ATOL, load_suite, load_task, sha256_file
from kit.suite.tolerance import IMPLEMENTATION_RTOL, derive, dumps_record, load_record, write

TASKS = Path(__file__).resolve().parents[1] / "tasks"
K_LONG = 65536  # its floor u·8·√K (1.2e-4) is above IMPLEMENTATION_RTOL


def _defs() -> list[TaskDef]:
    return [
        TaskDef(id="tiny_add", category="binary", op="Add", summary="Element-wise sum.",
                inputs=[In("a", (4, 64)), In("b", (4, 64))], outputs=[Out("y")], forward="return a + b"),
        TaskDef(id="tiny_matmul_long_k", category="matrix", op="MatMul", summary="A long inner product.",
                inputs=[In("a", (8, K_LONG)), In("b", (K_LONG, 8))], outputs=[Out("y")], forward="return a @ b"),
    ]


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    """Two task folders of our own (an Add and a MatMul of K = 4096) and a manifest listing their files."""
    root = tmp_path_factory.mktemp("suite")
    entries = []
    for td in _defs():
        folder = root / td.category / td.id
        folder.mkdir(parents=True)
        for name, data in task_files(td, "train").items():
            (folder / name).write_bytes(data)
        entries.append({"id": td.id, "category": td.category, "op_type": td.op, "mechanism": "atomic",
                        "split": "train", "files": {n: sha256_file(folder / n) for n in ("task.toml", "model.py",
                                                                                            "model.onnx")}})
    (root / "manifest.json").write_text(json.dumps({"tasks": entries}))
    return root


@pytest.mark.torch
def test_long_matmul_gets_a_looser_tolerance_than_add_and_the_reason_says_why(suite):
    pytest.importorskip("torch")
    add, mm = (derive(t) for t in load_suite(suite, ids=["tiny_add", "tiny_matmul_long_k"]))
    assert add.k == 1 and mm.k == K_LONG
    assert add.rtol == IMPLEMENTATION_RTOL < mm.rtol and mm.atol > add.atol
    assert add.truth == mm.truth == "torch float64"
    assert set(mm.errors) == {"ONNX Runtime", "torch", "onnx.reference"}
    assert 0 < max(mm.errors.values()) < 1e-4  # float32 against the float64 truth, relative
    for d in (add, mm):
        assert f"K = {d.k}" in d.reason and "ONNX Runtime" in d.reason and "onnx.reference" in d.reason
        assert "torch float64" in d.reason and "Higham" in d.reason
    assert "the inner dimension" in mm.reason


@pytest.mark.torch
def test_write_puts_the_derivation_into_task_toml_and_the_manifest(tmp_path, suite):
    pytest.importorskip("torch")
    shutil.copytree(suite, tmp_path / "s")
    task = load_suite(tmp_path / "s", ids=["tiny_matmul_long_k"])[0]
    d = derive(task)
    assert write(task, d)
    again = load_task(task.path)
    assert (again.tolerance.atol, again.tolerance.rtol) == (d.atol, d.rtol)
    assert again.tolerance.method == "derived" and again.tolerance.accumulation_length == K_LONG
    assert again.tolerance.paper_atol == PAPER_ATOL and again.tolerance.reason == d.reason
    assert again.inputs == task.inputs and again.outputs == task.outputs  # the rest of the file is kept
    entry = json.loads((tmp_path / "s" / "manifest.json").read_text())["tasks"][1]
    assert entry["files"]["task.toml"] == sha256_file(task.path / "task.toml")
    feeds = make_inputs(again, 0)  # ONNX Runtime itself passes against the new tolerance
    ref = run_reference(again.onnx_path, feeds)
    assert saudit.tolerance_ratio(again, ref, ref) == 0.0


@pytest.mark.torch
def test_cli_derives_writes_and_records(tmp_path, suite, capsys):
    pytest.importorskip("torch")
    shutil.copytree(suite, tmp_path / "s")
    record = tmp_path / "tolerances.toml"
    assert main(["tasks", "tolerances", "--dir", str(tmp_path / "s"), "--write", "--record", str(record)]) == 0
    out = capsys.readouterr().out
    assert "derived 2 of 2" in out and "wrote 2 task.toml" in out
    rec = load_record(record)
    assert set(rec) == {"tiny_add", "tiny_matmul_long_k"} and rec["tiny_matmul_long_k"]["accumulation_length"] == K_LONG
    defs = _defs()  # the generator writes a recorded derivation into task.toml
    apply_tolerances(defs, rec)
    toml = tomllib.loads(task_files(defs[1], "train")["task.toml"].decode())["tolerance"]
    assert toml["method"] == "derived" and toml["atol"] == rec["tiny_matmul_long_k"]["atol"]
    assert toml["reason"].startswith("derived (mkb tasks tolerances)")
    assert tomllib.loads(dumps_record([])) == {}


def test_audit_flags_a_native_error_over_the_tolerance(suite):
    task = load_suite(suite, ids=["tiny_matmul_long_k"])[0]
    feeds = make_inputs(task, 0)
    ref = run_reference(task.onnx_path, feeds)
    tol = task.tolerance
    bad = {"y": ref["y"] + np.float32(3 * (tol.atol + tol.rtol * float(np.abs(ref["y"]).max())))}
    nat = {"convert_ok": True, "run_ok": True, "op_types": ["MatMul"], "runtime_op_types": ["MatMul"],
           "median_ms": 1.0, "error": "", "outputs": bad}
    cols = saudit._native_columns(task, nat, ref)
    assert cols["native_over_tolerance"] is True and cols["native_tol_ratio"] > 1 and cols["native_ok"] is False
    assert cols["native_ok_at_paper"] is False or tol.atol * 3 < PAPER_ATOL
    good = saudit._native_columns(task, {**nat, "outputs": {"y": ref["y"]}}, ref)
    assert good["native_over_tolerance"] is False and good["native_tol_ratio"] == 0.0 and good["native_ok_at_paper"]


def test_old_task_toml_without_the_new_fields_loads(tmp_path):
    src = TASKS / "matrix" / "matmul_2d_square"
    dst = tmp_path / "matrix" / "matmul_2d_square"
    shutil.copytree(src, dst)
    text = (dst / "task.toml").read_text()
    lines = [ln for ln in text.splitlines() if not ln.startswith(("method =", "accumulation_length =",
                                                                    "paper_atol =", "reason ="))]
    (dst / "task.toml").write_text("\n".join(lines) + "\n")
    task = load_task(dst)
    assert task.tolerance.method == "" and task.tolerance.accumulation_length == 0 and task.tolerance.reason == ""
    assert task.tolerance.paper_atol == PAPER_ATOL


@pytest.mark.torch
def test_an_empty_folder_is_refused_by_name(tmp_path, capsys):
    pytest.importorskip("torch")
    from kit.cli import main

    assert main(["tasks", "tolerances", "--dir", str(tmp_path)]) == 2
    assert f"--dir {tmp_path}: no task folders" in capsys.readouterr().err
