"""kit.score.noisefloor (what `mkb calibrate` writes) on hand-made records: coverage, interval widths, the noise
floor per task, native's own fast_1.0 shares, untimeable tasks."""

from __future__ import annotations

import math

import pytest

from kit.score import noisefloor as calibrate


def _record(task: str, speedup: float | None, lo: float | None, hi: float | None, status: str = "ok",
            untimeable: bool = False) -> dict:
    return {"task_id": task, "status": status, "error_kind": "none", "speedup": speedup, "speedup_ci_low": lo,
            "speedup_ci_high": hi, "native_ms": 1.0, "timing_untimeable": untimeable}


RECORDS = [
    _record("a", 1.00, 0.98, 1.02),
    _record("b", 1.03, 1.01, 1.05),  # the interval misses 1.0: native fast_1.0 and significantly so
    _record("c", 0.97, 0.90, 1.05, untimeable=True),
    _record("d", 1.01, 0.99, 1.04),
    _record("e", None, None, None, status="verify_mismatch"),  # native fails: no interval
]


def test_task_rows_and_summary():
    rows = [calibrate.task_row(r) for r in RECORDS]
    by = {r["task_id"]: r for r in rows}
    assert by["a"]["covers_one"] and not by["b"]["covers_one"] and by["e"]["covers_one"] is None
    assert by["a"]["noise_log"] == pytest.approx(math.log(1.02 / 0.98) / 2)
    assert by["c"]["untimeable"] and not by["e"]["native_passes"]
    s = calibrate.summarize(rows, 0.95)
    assert (s["tasks"], s["native_passes"], s["timed"]) == (5, 4, 4)
    assert s["coverage"] == pytest.approx(3 / 4)
    assert s["ci_width_median"] == pytest.approx((0.04 + 0.05) / 2)  # widths 0.04, 0.04, 0.15, 0.05
    assert s["native_fast_1.0"] == pytest.approx(2 / 4) and s["native_fast_sig_1.0"] == pytest.approx(1 / 4)
    assert s["untimeable"] == ["c"]
    line = calibrate.coverage_line(s)
    assert "contains 1.0 for 3/4 timed tasks (75.0 %)" in line and "significantly on 25.0 %" in line


def test_a_calibration_without_timings():
    s = calibrate.summarize([calibrate.task_row(RECORDS[-1])])
    assert s["timed"] == 0 and s["coverage"] is None
    assert calibrate.coverage_line(s) == "A/A coverage: no task was timed"


def _calibration_json(path, speedups: dict[str, float], half_log: float = 0.02):
    """A calibration.json of one separate A/A run: per task its speedup and an interval of half-width
    ``half_log`` on the log scale."""
    import json

    from kit.score.noisefloor import summarize

    rows = [calibrate.task_row(_record(t, s, s * math.exp(-half_log), s * math.exp(half_log)))
            for t, s in speedups.items()]
    path.mkdir(parents=True, exist_ok=True)
    (path / "calibration.json").write_text(json.dumps({"summary": summarize(rows), "tasks": rows}))


def test_between_runs_combines_separate_calibrations_into_the_run_dirs_file(tmp_path, capsys):
    """mkb calibrate --between-runs: 5 separate A/A runs of 30 tasks whose speedups move by N(0, 0.05^2) between
    runs: the pooled figure is near 0.05, per-task figures exist (5 runs), the file keeps its summary."""
    import json

    import numpy as np

    from kit.cli import main
    from kit.outline.calibrate import CalibrationError, combine
    from kit.settings.config import EvalConfig

    rng = np.random.default_rng(7)
    dirs = []
    for i in range(5):
        dirs.append(tmp_path / f"cal-{i}")
        _calibration_json(dirs[-1], {f"t{j}": float(np.exp(rng.normal(0, 0.05) + rng.normal(0, 0.01)))
                                     for j in range(30)})
    cfg = EvalConfig.model_validate({"run": {"dir": str(dirs[0])}})
    assert combine(cfg, dirs[1:]) == 0
    data = json.loads((dirs[0] / "calibration.json").read_text())
    br = data["between_run"]
    assert abs(br["pooled"]["log_sd"] - 0.05) < 0.012 and br["pooled"]["runs"] == 5 and len(br["tasks"]) == 30
    assert data["summary"]["timed"] == 30 and len(br["sources"]) == 5
    assert "between runs: sd of ln speedup" in capsys.readouterr().out
    with pytest.raises(CalibrationError, match="at least 2"):
        combine(EvalConfig.model_validate({"run": {"dir": str(tmp_path / "none")}}), [dirs[1]])
    capsys.readouterr()
    assert main(["calibrate", "--config", str(_toml(tmp_path, tmp_path / "none")), "--between-runs",
                 str(tmp_path / "missing")]) == 2
    assert "not found: " in capsys.readouterr().err
    # a run.dir not made yet gets its calibration.json; a folder without one is named with the file it lacks; a
    # JSON file that is not a calibration is refused
    fresh = tmp_path / "fresh" / "run"
    assert combine(EvalConfig.model_validate({"run": {"dir": str(fresh)}}), dirs[1:3]) == 0
    assert "between_run" in json.loads((fresh / "calibration.json").read_text())
    (tmp_path / "empty").mkdir()
    (tmp_path / "other.json").write_text("{}")
    with pytest.raises(CalibrationError) as err:
        combine(EvalConfig.model_validate({"run": {"dir": str(tmp_path / "none")}}),
                [dirs[1], dirs[2], tmp_path / "empty", tmp_path / "other.json"])
    assert f"not found: {tmp_path / 'empty' / 'calibration.json'}" in str(err.value)
    assert "other.json: not a calibration.json" in str(err.value)


def _eval_run(path, speedups: dict[str, float], half_log: float = 0.02):
    """The record shards of one ``mkb eval`` run: per task one ok candidate (the same file in every run) with its
    speedup and an interval of half-width ``half_log`` on the log scale."""
    from kit.results.records import Record, Status
    from kit.results.shards import ShardWriter

    path.mkdir(parents=True)
    with ShardWriter(path, "w0", flush_every=100) as w:
        for t, v in speedups.items():
            w.append(Record(job_id=f"{t}-s", method="m", task_id=t, sample_id="s", candidate_sha256="c" * 64,
                            config_digest="d", status=Status.OK, speedup=v, speedup_ci_low=v * math.exp(-half_log),
                            speedup_ci_high=v * math.exp(half_log)))


def test_between_runs_takes_the_candidates_of_separate_evaluations_and_a_copied_calibration_once(tmp_path):
    """Six evaluations of the same 8 candidates, each candidate's speedup moving by N(0, 0.06^2) between runs (what
    two copies of native in an A/A run do not show), beside one A/A calibration copied into the first: per-task
    figures from the candidates' 6 runs, the pooled one over both sources, the copy read once."""
    import json
    import shutil

    import numpy as np

    from kit.outline.calibrate import combine
    from kit.settings.config import EvalConfig

    rng = np.random.default_rng(3)
    cal = tmp_path / "cal"
    _calibration_json(cal, {f"t{j}": 1.0 for j in range(8)})
    true = {f"t{j}": float(np.exp(rng.normal(0, 0.5))) for j in range(8)}
    runs = [tmp_path / f"eval-{i}" for i in range(6)]
    for r in runs:
        _eval_run(r, {t: v * float(np.exp(rng.normal(0, 0.06))) for t, v in true.items()})
    shutil.copy(cal / "calibration.json", runs[0] / "calibration.json")
    assert combine(EvalConfig.model_validate({"run": {"dir": str(runs[0])}}), [cal, *runs[1:]]) == 0
    data = json.loads((runs[0] / "calibration.json").read_text())
    br = data["between_run"]
    # 6 runs each: the one A/A run adds no degree of freedom, its copy is not taken for a second A/A run
    assert set(br["tasks"]) == set(true) and all(t["runs"] == 6 for t in br["tasks"].values())
    assert 0.03 < br["pooled"]["log_sd_raw"] < 0.09 and len(br["sources"]) == 7 and br["pooled"]["points"] == 48
    assert data["tasks"] and data["summary"]["timed"] == 8  # the copied calibration's own content kept


def _toml(tmp_path, run_dir):
    p = tmp_path / "c.toml"
    p.write_text(f'[run]\ndir = "{run_dir}"\n')
    return p
