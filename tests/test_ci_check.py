"""CI's check of the main command (``.ci/check_main.py``) on a run directory and a kit cache of our own: the
statuses against candidates/expected.toml, the report, the native build's time from meta.json or the log."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import polars as pl
from sample_expected import expected_statuses, status_differences

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("check_main", ROOT / ".ci" / "check_main.py")
check_main = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_main)


def _run(tmp: Path, statuses: dict[str, str], report: bool = True, build_s: float | None = 754.2) -> Path:
    rows = [{"task_id": k.split("/")[0], "sample_id": k.split("/")[1], "method": "sample", "status": v,
             "error_message": "" if v == "ok" else "it failed"} for k, v in statuses.items()]
    (tmp / "run").mkdir()
    pl.DataFrame(rows).write_parquet(tmp / "run" / "results.parquet")
    if report:
        (tmp / "run" / "report").mkdir()
        (tmp / "run" / "report" / "report.html").write_text("<html></html>")
    native = tmp / "cache" / "native" / "0123456789abcdef"
    native.mkdir(parents=True)
    meta = {"key": native.name, "arch": "x86_64", "static": False, "tree_digest": "89ff82664efb30d2"}
    if build_s is not None:
        meta |= {"build_s": build_s, "build_steps": 812}
    (native / "meta.json").write_text(json.dumps(meta))
    (native / "done").write_text("ok\n")
    cfg = tmp / "cfg.toml"
    cfg.write_text(f'[run]\ndir = "{tmp / "run"}"\n[tasks]\ndir = "{ROOT / "tasks"}"\n'
                   f'[mnn]\ncache_dir = "{tmp / "cache"}"\n')
    return cfg


def test_the_expected_statuses_pass(tmp_path, capsys):
    expected = expected_statuses("x86_64")
    cfg = _run(tmp_path, expected)
    assert check_main.main(["--config", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert f"statuses as expected (x86_64): {len(expected)}/{len(expected)} records" in out
    assert "native build (x86_64, 0123456789abcdef): 12 min 34 s, 812 steps (meta.json build_s)" in out
    assert "report: " in out


def test_a_different_status_a_missing_record_or_no_report_fail(tmp_path, capsys):
    expected = expected_statuses("x86_64")
    got = dict(expected) | {"tile_4d/correct": "compile_error"}
    del got["det_batch_8x8/wrong"]
    cfg = _run(tmp_path, got, report=False)
    assert check_main.main(["--config", str(cfg)]) == 1
    out = capsys.readouterr().out
    assert "tile_4d/correct: expected ok, got compile_error (it failed)" in out
    assert "det_batch_8x8/wrong: expected verify_mismatch, no record" in out
    assert "no report at" in out


def test_status_differences_name_extra_records():
    rows = [{"task_id": "t", "sample_id": "s", "status": "ok", "method": "sample"},
            {"task_id": "t", "sample_id": "s", "status": "ok", "method": "native"}]
    diffs = status_differences(rows, "x86_64")
    assert diffs[-1] == "t/s: got ok, not in expected.toml"
    assert len(diffs) == len(expected_statuses("x86_64")) + 1  # every expected sample lacks its record


def test_the_build_time_comes_from_the_log_without_build_s(tmp_path, capsys):
    log = ("(pid=4242) native MNN build: 40/812 steps (5 %), 31 s\n"
           "(pid=4242) native MNN build: 812/812 steps (100 %), 11 min 7 s\n"
           "(pid=4242) workspace build: 812/812 steps (100 %), 40 s\n")
    assert check_main.log_build_s(log) == (667.0, 812)
    assert check_main.log_build_s("native MNN build: 5/5 steps (100 %), 1 h 02 min") == (3720.0, 5)
    assert check_main.log_build_s("nothing") is None
    cfg = _run(tmp_path, expected_statuses("x86_64"), build_s=None)
    (tmp_path / "eval.log").write_text(log)
    assert check_main.main(["--config", str(cfg), "--log", str(tmp_path / "eval.log")]) == 0
    assert "native build (x86_64): 11 min 07 s, 812 steps (the eval log's last progress line)" in capsys.readouterr().out


def test_a_second_baseline_for_the_same_target_is_a_warning(capsys):
    builds = [{"key": "a", "arch": "x86_64", "build_s": 600.0}, {"key": "b", "arch": "aarch64", "static": True},
              {"key": "c", "arch": "x86_64"}]
    assert check_main.list_baselines(builds) == 0
    out, err = capsys.readouterr()
    assert "native baseline a: x86_64, tree ?, 10 min 00 s" in out and "b: aarch64 static" in out
    assert "c is a second native baseline for x86_64 beside a" in err
