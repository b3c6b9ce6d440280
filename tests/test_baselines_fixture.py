"""Baseline tables end to end on the fixture engine: an interleaved run fills the table of this machine; a run
with ``baselines.native_timing = "table"`` times only the candidates against it (its records say so); a changed
task file, another hardware fingerprint (injected) and another MNN flags digest are each refused with the
reason; ``mkb baselines list`` shows the table and the report names it.

One cache and one interleaved run are shared by the module (the engine's native build is its slow part); each
later run writes into its own run directory.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from conftest_fixture import FIXTURE_ROOT
from evalcfg import write_config

from kit.baselines.table import read_table, table_path
from kit.cli import main
from kit.host import machine as hostinfo
from kit.outline.evaluate import evaluate
from kit.results.shards import scan
from kit.settings.config import load_config

pytestmark = pytest.mark.slow

TASKS = ["fx_exp", "fx_argmax"]


def _config(tmp: Path, run: str, tasks_dir: Path, **more) -> Path:
    sections = {"verify": {"trials": 2}, "timing": {"warmup": 1, "iterations": 10, "rounds": 3},
                "build": {"jobs": 2}, **more}
    mnn = {"engine": "fixture", "source_dir": tmp / "engine", "cache_dir": tmp / "cache",
           **sections.pop("mnn", {})}
    return write_config(tmp / f"{run}.toml", run_dir=tmp / run, tasks_dir=tasks_dir, ids=TASKS, method="sample",
                        candidates=tmp / "cands", mnn=mnn, **sections)


def _records(cfg_path: Path) -> dict[str, dict]:
    df = scan(load_config(cfg_path).run.dir).collect()
    assert df.height == len(TASKS)
    return {r["task_id"]: r for r in df.iter_rows(named=True)}


@pytest.fixture(scope="module")
def filled(tmp_path_factory, fixture_engine_pristine):
    """The interleaved run: (tmp, its config, the key of this machine's table)."""
    tmp = tmp_path_factory.mktemp("baselines")
    shutil.copytree(fixture_engine_pristine, tmp / "engine")
    for t in TASKS:  # the correct samples only: every job is timed
        shutil.copytree(FIXTURE_ROOT / "candidates" / "sample" / t / "correct", tmp / "cands" / t / "correct")
    cfg_path = _config(tmp, "run1", FIXTURE_ROOT / "tasks")
    assert evaluate(load_config(cfg_path)) == 0
    key = json.loads((tmp / "run1" / "provenance.json").read_text())["baselines"]["key"]
    return tmp, cfg_path, key


def test_an_interleaved_run_fills_the_table_of_this_machine(filled):
    tmp, cfg_path, key = filled
    recs = _records(cfg_path)
    table = read_table(table_path(tmp / "cache" / "baselines", key))
    assert sorted(table["task_id"].to_list()) == sorted(TASKS)
    assert set(table["source"].to_list()) == {str((tmp / "run1").resolve())}
    assert table["hardware"][0].startswith(hostinfo.host_arch())
    for r in recs.values():
        assert r["status"] == "ok" and r["native_timing"] == "interleaved" and r["baseline_key"] == key
        entry = table.filter(pl.col("task_id") == r["task_id"]).row(0, named=True)
        assert r["timing_basis"] == "op"  # so the record's native time is the entry's (op basis)
        assert entry["native_ms"] == pytest.approx(r["native_ms"]) and entry["job_id"] == r["job_id"]
        assert entry["rounds"] == 3 and len(entry["native_round_ms"]) == 3 and entry["native_model_ms"] > 0


def test_a_table_run_times_only_the_candidates_and_says_so(filled, capsys):
    tmp, _, key = filled
    root = tmp / "cache" / "baselines"
    before = read_table(table_path(root, key))
    cfg_path = _config(tmp, "run2", FIXTURE_ROOT / "tasks", baselines={"native_timing": "table"},
                       report={"enabled": True})
    assert load_config(cfg_path).digest() != load_config(filled[1]).digest()  # never one run directory with run1
    assert evaluate(load_config(cfg_path)) == 0
    out = capsys.readouterr().out
    assert f"native times: baseline table {key} (2 records; only the candidates were timed" in out
    for r in _records(cfg_path).values():
        assert r["status"] == "ok", r["error_message"]
        assert (r["native_timing"], r["baseline_key"]) == ("table", key)
        assert r["native_samples_ms"] == [] and r["native_invocation_sha256"] == ""  # no native run
        entry = before.filter(pl.col("task_id") == r["task_id"]).row(0, named=True)
        assert r["native_ms"] == pytest.approx(entry["native_ms"])
        assert r["speedup"] == pytest.approx(r["native_ms"] / r["candidate_ms"])
        assert r["speedup_ci_low"] <= r["speedup"] <= r["speedup_ci_high"]
    assert read_table(table_path(root, key)).height == before.height  # a table run adds no measurement
    prov = json.loads((tmp / "run2" / "provenance.json").read_text())["baselines"]
    assert (prov["key"], prov["native_timing"]) == (key, "table")
    report = (tmp / "run2" / "report" / "report.md").read_text()
    assert "## Baseline tables" in report and key in report


def test_a_changed_task_file_is_refused_with_the_reason(filled):
    tmp, _, key = filled
    tasks = tmp / "tasks-changed"
    shutil.copytree(FIXTURE_ROOT / "tasks", tasks)
    toml = next(tasks.rglob("fx_exp/task.toml"))
    toml.write_text(toml.read_text() + "\n# edited after the table measured it\n")
    cfg_path = _config(tmp, "run3", tasks, baselines={"native_timing": "table"})
    assert evaluate(load_config(cfg_path)) == 0
    recs = _records(cfg_path)
    exp, argmax = recs["fx_exp"], recs["fx_argmax"]
    assert (exp["status"], exp["error_kind"]) == ("timing_failed", "no_baseline")
    assert "task fx_exp: its files changed since baseline table" in exp["error_message"]
    assert exp["speedup"] is None and exp["native_ms"] is None
    assert argmax["status"] == "ok" and argmax["native_timing"] == "table"  # its files did not change


def test_another_hardware_fingerprint_is_refused_with_the_reason(filled, monkeypatch):
    tmp, _, key = filled
    real = hostinfo.fingerprint()
    monkeypatch.setattr(hostinfo, "fingerprint", lambda: real | {"cpu_model": "Another CPU 9000"})
    cfg_path = _config(tmp, "run4", FIXTURE_ROOT / "tasks", baselines={"native_timing": "table"})
    assert evaluate(load_config(cfg_path)) == 0
    for r in _records(cfg_path).values():
        assert (r["status"], r["error_kind"]) == ("timing_failed", "no_baseline")
        assert "no baseline table for this hardware" in r["error_message"]
        assert "Another CPU 9000" in r["error_message"] and real["cpu_model"] in r["error_message"]
        assert r["baseline_key"] == ""


def test_another_mnn_flags_digest_is_refused_with_the_reason(filled):
    tmp, _, key = filled
    cfg_path = _config(tmp, "run5", FIXTURE_ROOT / "tasks", baselines={"native_timing": "table"},
                       mnn={"cmake_args": ["-DMKB_BASELINE_TEST=ON"]})
    cfg = load_config(cfg_path)
    assert cfg.mnn.cmake_args == ["-DMKB_BASELINE_TEST=ON"]
    assert evaluate(cfg) == 0
    for r in _records(cfg_path).values():
        assert (r["status"], r["error_kind"]) == ("timing_failed", "no_baseline")
        assert "other build flags or runner settings" in r["error_message"]
        assert f"table {key}" in r["error_message"] and "native build key" in r["error_message"]


def test_mkb_baselines_list_and_show(filled, capsys):
    tmp, cfg_path, key = filled
    assert main(["baselines", "list", "--config", str(cfg_path)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if key in line)
    assert hostinfo.host_arch() in row and "3.2.2" in row
    assert main(["baselines", "list", "--dir", str(tmp / "cache" / "baselines"), "--fingerprint", "no-such"]) == 0
    assert key not in capsys.readouterr().out
    assert main(["baselines", "show", key[:6], "--config", str(cfg_path)]) == 0
    out = capsys.readouterr().out
    assert f"baseline table {key}" in out and all(t in out for t in TASKS)
    assert main(["baselines", "show", "zzzz", "--config", str(cfg_path)]) == 2
    assert "no baseline table" in capsys.readouterr().err
