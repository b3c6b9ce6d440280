"""kit.baselines on tables written here: the key and its parts, writing and trimming a table, lookups and the
reason of each miss, the Welch interval of a table-mode speedup, the report's drift check and the summary's note."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats

from kit.baselines import table as btable
from kit.baselines.drift import DEFAULT_BAND_LOG, drift
from kit.baselines.key import BaselineKey, RunnerSettings, task_sha256
from kit.baselines.lookup import NoBaseline, find
from kit.baselines.notes import native_timing_note
from kit.stages.speedup import unpaired_estimate, welch_interval
from kit.suite.tasks import load_suite

HW = {"device": "host", "cpu_model": "CPU A", "arch": "x86_64", "cpus": 8}
SETTINGS = RunnerSettings(threads=1, precision="high", warmup=10, iterations=30)


def _key(hardware=HW, mnn="3.2.2", native="n1", settings=SETTINGS) -> BaselineKey:
    return BaselineKey(hardware, mnn, native, settings)


def _entry(task="t1", digest="d1", ms=1.0, at="2026-01-01T00:00:00.000000+00:00", source="/runs/a", job="j") -> btable.Entry:
    return btable.Entry(task_id=task, task_sha256=digest, native_ms=ms, native_model_ms=ms * 1.1,
                        native_round_ms=[ms * 0.9, ms, ms * 1.1], native_model_round_ms=[ms * 1.1] * 3,
                        native_op_types={"UnaryOp": 1}, rounds=3, recorded_at=at, source=source, job_id=job,
                        method="sample")


def test_the_key_changes_with_each_of_its_parts_and_only_them():
    k = _key()
    assert _key().key == k.key and len(k.key) == 16
    others = [_key(hardware=HW | {"cpu_model": "CPU B"}), _key(mnn="3.3.0"), _key(native="n2"),
              _key(settings=RunnerSettings(2, "high", 10, 30)), _key(settings=RunnerSettings(1, "low", 10, 30))]
    assert len({o.key for o in others} | {k.key}) == 6
    assert others[0].flags_digest == k.flags_digest and others[0].fingerprint_id != k.fingerprint_id
    assert others[2].fingerprint_id == k.fingerprint_id and others[2].flags_digest != k.flags_digest
    assert k.describe()["hardware"] == "x86_64, CPU A, 8 CPUs"


def test_the_task_digest_follows_the_task_files(tmp_path, fixture_tasks_dir):
    import shutil

    shutil.copytree(fixture_tasks_dir, tmp_path / "tasks")
    task = next(t for t in load_suite(tmp_path / "tasks") if t.id == "fx_exp")
    before = task_sha256(task)
    assert task_sha256(task) == before
    (task.path / "model.onnx").write_bytes((task.path / "model.onnx").read_bytes() + b"\0")
    assert task_sha256(task) != before


def test_a_table_keeps_every_measurement_up_to_the_newest_max_entries(tmp_path, monkeypatch):
    monkeypatch.setattr(btable, "MAX_ENTRIES", 3)
    k = _key()
    for i in range(5):
        btable.add_entry(tmp_path, k, _entry(ms=1.0 + i, at=f"2026-01-01T00:00:0{i}.000000+00:00"))
    btable.add_entry(tmp_path, k, _entry(task="t2", ms=7.0))
    df = btable.read_table(btable.table_path(tmp_path, k.key))
    assert sorted(df.filter(pl.col("task_id") == "t1")["native_ms"].to_list()) == [3.0, 4.0, 5.0]
    assert df.filter(pl.col("task_id") == "t2").height == 1
    assert set(df["key"].to_list()) == {k.key} and set(df["hardware"].to_list()) == {"x86_64, CPU A, 8 CPUs"}
    summary = btable.summary(tmp_path).row(0, named=True)
    assert (summary["key"], summary["tasks"], summary["entries"]) == (k.key, 2, 4)


def test_a_damaged_table_is_named(tmp_path):
    bad = btable.table_path(tmp_path, "0123456789abcdef")
    bad.write_text("not parquet")
    with pytest.raises(btable.TableError, match="0123456789abcdef.parquet: not a readable baseline table"):
        btable.read_table(bad)


def test_find_returns_the_newest_matching_entry(tmp_path):
    k = _key()
    btable.add_entry(tmp_path, k, _entry(ms=1.0, at="2026-01-01T00:00:01.000000+00:00"))
    btable.add_entry(tmp_path, k, _entry(ms=2.0, at="2026-01-01T00:00:02.000000+00:00"))
    hit = find(tmp_path, k, "t1", "d1")
    assert hit.native_ms == 2.0 and hit.native_op_types == {"UnaryOp": 1} and hit.key == k.key


@pytest.mark.parametrize("other, says", [
    (dict(task="t1", digest="d2"), "task t1: its files changed since baseline table"),
    (dict(task="t9"), "has no entry for it"),
])
def test_a_miss_in_the_table_of_this_key_names_the_task(tmp_path, other, says):
    k = _key()
    btable.add_entry(tmp_path, k, _entry())
    with pytest.raises(NoBaseline, match=says):
        find(tmp_path, k, other["task"], other.get("digest", "d1"))


def test_a_miss_without_a_table_of_this_key_names_what_differs(tmp_path):
    with pytest.raises(NoBaseline, match="no baseline table under"):
        find(tmp_path, _key(), "t1", "d1")
    btable.add_entry(tmp_path, _key(), _entry())
    with pytest.raises(NoBaseline, match=r"no baseline table for this hardware.*CPU B.*other fingerprints: .*CPU A"):
        find(tmp_path, _key(hardware=HW | {"cpu_model": "CPU B"}), "t1", "d1")
    with pytest.raises(NoBaseline, match="are of MNN 3.2.2, not 3.3.0"):
        find(tmp_path, _key(mnn="3.3.0"), "t1", "d1")
    with pytest.raises(NoBaseline, match=r"native build key.* n1 there, n2 here"):
        find(tmp_path, _key(native="n2"), "t1", "d1")
    with pytest.raises(NoBaseline, match="timing.threads 1 there, 4 here") as exc:
        find(tmp_path, _key(settings=RunnerSettings(4, "high", 10, 30)), "t1", "d1")
    assert "native build key" not in str(exc.value)  # only what differs is named


def test_the_table_speedup_is_welchs_interval_on_the_logs():
    rng = np.random.default_rng(3)
    native, cand = np.exp(rng.normal(0.0, 0.05, 10)), np.exp(rng.normal(-0.3, 0.08, 7))
    est = unpaired_estimate(cand, native, 0.95)
    assert est.speedup == pytest.approx(math.exp(np.mean(np.log(native)) - np.mean(np.log(cand))))
    ref = stats.ttest_ind(np.log(native), np.log(cand), equal_var=False).confidence_interval(0.95)
    assert (math.log(est.ci_low), math.log(est.ci_high)) == pytest.approx((ref.low, ref.high))
    assert welch_interval(np.array([1.0]), np.array([1.0, 2.0]), 0.95) is None
    with pytest.raises(ValueError, match="positive"):
        unpaired_estimate(np.array([1.0, 0.0]), native)


def _records(run_dir: str, key: str, ms: dict[str, float], timing="interleaved") -> pl.DataFrame:
    return pl.DataFrame([{"task_id": t, "job_id": f"j-{t}", "native_timing": timing, "baseline_key": key,
                          "native_ms": v} for t, v in ms.items()])


def test_drift_compares_a_run_with_the_other_runs_measurements(tmp_path):
    k = _key()
    for src, t1, t2 in (("/runs/old1", 1.00, 2.0), ("/runs/old2", 1.02, 2.0), ("/runs/new", 1.60, 2.1)):
        btable.add_entry(tmp_path, k, _entry(task="t1", ms=t1, source=src))
        btable.add_entry(tmp_path, k, _entry(task="t2", ms=t2, source=src))
    btable.add_entry(tmp_path, k, _entry(task="t3", ms=5.0, source="/runs/new"))  # measured by no other run
    recs = _records("/runs/new", k.key, {"t1": 1.60, "t2": 2.1, "t3": 5.0})
    out = {r["task_id"]: r for r in drift(recs, Path("/runs/new"), tmp_path).iter_rows(named=True)}
    assert set(out) == {"t1", "t2"}  # t3: no other run to compare with
    assert out["t1"]["table_native_ms"] == pytest.approx(1.01) and out["t1"]["table_entries"] == 2
    assert out["t1"]["drifts"] and not out["t2"]["drifts"] and out["t1"]["band"] == DEFAULT_BAND_LOG
    # with the task's A/A noise band from a calibration, that band decides
    tight = drift(recs, Path("/runs/new"), tmp_path, noise={"t2": 0.01})
    assert tight.filter(pl.col("task_id") == "t2").row(0, named=True)["drifts"]
    # a table run's native times are the table's: nothing to check
    assert drift(_records("/runs/new", k.key, {"t1": 1.6}, "table"), Path("/runs/new"), tmp_path).height == 0


def test_the_summary_note_names_a_table_and_never_mixes_silently():
    assert native_timing_note(_records("r", "k", {"t1": 1.0})) is None
    note = native_timing_note(_records("r", "abc", {"t1": 1.0, "t2": 1.0}, "table"))
    assert note.startswith("native times: baseline table abc (2 records; only the candidates were timed")
    mixed = pl.concat([_records("r", "abc", {"t1": 1.0}, "table"), _records("r", "abc", {"t2": 1.0})])
    assert "MIXED with 1 records timed interleaved" in native_timing_note(mixed)
