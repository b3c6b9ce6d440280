"""A run whose worker cannot set up (the native build fails) records every pending job as ``harness_error`` with
the one-line cause, says that line and exits 2; the same command run again retries those jobs.

The serial tests inject a setup and a job function (no build); the ``evaluate`` tests run the real setup
(:func:`kit.job.worker.setup_worker`: the fixture engine's native build, made to fail) in serial mode, sandbox off
(a fake program in the test's folder under /tmp would be hidden by the sandbox's private /tmp).
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest
from conftest_fixture import fixture_config_text
from test_buildfail import needs_toolchain, tools_without
from test_buildwatch import hanging_ninja

from kit.cli import main
from kit.job.record import Job, setup_cause, setup_failed_record
from kit.mnn.native import NativeBuildError
from kit.outline.evaluate import evaluate, execute
from kit.results.records import ErrorKind, Record, Status
from kit.results.shards import done_job_ids, read_records
from kit.run.plan import make_jobs
from kit.run.serial_executor import SerialExecutor
from kit.settings.config import EvalConfig, load_config
from kit.settings.tomlvalue import toml_value
from kit.suite.tasks import load_suite

FIXTURE_ROOT = Path(__file__).resolve().parent / "fixture_engine"
CAUSE = "native fixture build failed: /bin/sh: 1: /nonexistent/ccache: not found; check mnn.cmake_args"


def _cfg(tmp: Path, **sections: dict) -> EvalConfig:
    return EvalConfig(run={"dir": tmp / "run"}, tasks={"dir": FIXTURE_ROOT / "tasks", "split": "all"},
                      candidates={"sources": [{"method": "sample", "path": FIXTURE_ROOT / "candidates" / "sample"}]},
                      mnn={"cache_dir": tmp / "cache", "engine": "fixture"}, dispatch={"mode": "serial"},
                      report={"enabled": False}, **sections)


def _jobs(cfg: EvalConfig) -> list[Job]:
    tasks = load_suite(cfg.tasks.dir, "all")
    jobs, _ = make_jobs(cfg, tasks, {t.id for t in tasks}, None)
    return jobs


def failing_setup(cfg: EvalConfig) -> object:
    raise NativeBuildError(CAUSE, cfg.mnn.cache_dir / "build-failed.log")


def working_setup(cfg: EvalConfig) -> object:
    """What SerialExecutor and provenance read of a worker, without any build."""
    return SimpleNamespace(name="w0", stage="", native=SimpleNamespace(dir=cfg.mnn.cache_dir), container=None,
                           baselines=SimpleNamespace(describe=lambda: None), release=lambda: None)


def ok_job(job: Job, worker: object) -> Record:
    t = job.task
    return Record(job_id=job.job_id, method=job.method, task_id=t.id, sample_id=job.sample_id,
                  candidate_sha256=job.candidate_sha256, config_digest=job.config_digest, category=t.category,
                  status=Status.OK, host=socket.gethostname(), worker="w0", started_at="2030-01-01T00:00:00+00:00")


def test_setup_cause_is_the_errors_one_line():
    assert setup_cause(NativeBuildError(CAUSE, Path("/w/build-failed.log"))) == CAUSE
    assert setup_cause(FileNotFoundError("/x: no such tree\nmore")) == "/x: no such tree"
    assert setup_cause(RuntimeError()) == "RuntimeError"


def test_a_failed_setup_records_every_job_once_and_a_rerun_retries_them(tmp_path):
    cfg = _cfg(tmp_path)
    jobs = _jobs(cfg)
    run_dir = cfg.run.dir
    with pytest.raises(NativeBuildError) as caught:
        execute(jobs, set(), run_dir, SerialExecutor(cfg, setup=failing_setup, job_fn=ok_job))
    assert caught.value.cause == CAUSE
    first = read_records(run_dir, dedupe=False)
    assert sorted(first["job_id"]) == sorted({j.job_id for j in jobs})  # every job, exactly once
    assert set(first["status"]) == {"harness_error"} and set(first["error_kind"]) == {"setup"}
    assert set(first["error_message"]) == {CAUSE}
    assert done_job_ids(run_dir) == set()  # harness errors are retried: nothing counts as done

    counts = execute(jobs, done_job_ids(run_dir), run_dir, SerialExecutor(cfg, setup=working_setup, job_fn=ok_job))
    assert counts.ran == len({j.job_id for j in jobs}) and counts.skipped == 0
    final = read_records(run_dir)  # deduplicated: the retry's record counts
    assert final.height == len({j.job_id for j in jobs}) and set(final["status"]) == {"ok"}
    assert done_job_ids(run_dir) == {j.job_id for j in jobs}


def test_the_record_factory(tmp_path):
    job = _jobs(_cfg(tmp_path))[0]
    rec = setup_failed_record(job, CAUSE, "w1")
    assert (rec.status, rec.error_kind, rec.error_message, rec.worker) == (
        Status.HARNESS_ERROR, ErrorKind.SETUP, CAUSE, "w1")
    assert rec.job_id == job.job_id and rec.started_at and not rec.compiled


# -- `mkb eval` with the real setup, its native build made to fail ----------------------------------------------
def _broken_tree(tmp_path: Path, fixture_engine: Path) -> dict:
    net = fixture_engine / "source" / "core" / "Net.cpp"
    net.write_text(net.read_text() + "int mkb_broken() { return 1 }\n")
    return {}


def _no_ninja(tmp_path: Path, fixture_engine: Path) -> dict:
    os.environ["PATH"] = tools_without(tmp_path / "bin", "ninja")  # restored by the test's monkeypatch
    return {}


def _hanging_ninja(tmp_path: Path, fixture_engine: Path) -> dict:
    os.environ["PATH"] = f"{hanging_ninja(tmp_path / 'bin')}:{os.environ['PATH']}"
    return {"build": {"stall_timeout_s": 1.0}}


def _unwritable_ccache(tmp_path: Path, fixture_engine: Path) -> dict:
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "ccache").write_text("a file where ccache's folder should be")
    return {"build": {"ccache": True}}


def _missing_launcher(tmp_path: Path, fixture_engine: Path) -> dict:
    return {"mnn": {"cmake_args": ["-DCMAKE_CXX_COMPILER_LAUNCHER=/nonexistent/ccache"]}}


@pytest.mark.slow
@needs_toolchain
@pytest.mark.parametrize("breakage, says", [
    (_no_ninja, "native fixture build needs ninja, not found on PATH"),
    (_missing_launcher, "native fixture build failed: /bin/sh: 1: /nonexistent/ccache: not found"),
    (_unwritable_ccache, "native fixture build failed: ccache: error: Failed to create directory"),
    (_broken_tree, "native fixture build failed: source/core/Net.cpp:"),
    (_hanging_ninja, "native fixture build timed out after "),
])
def test_eval_whose_native_build_fails_records_the_cause_for_every_job(breakage, says, tmp_path, fixture_engine,
                                                                        monkeypatch, capsys):
    if breakage is _unwritable_ccache and not shutil.which("ccache"):
        pytest.skip("needs ccache")
    monkeypatch.setenv("PATH", os.environ["PATH"])  # restored after the test, whatever the breakage sets
    more = breakage(tmp_path, fixture_engine)
    path = tmp_path / "cfg.toml"
    path.write_text(fixture_config_text(tmp_path / "run", source_dir=fixture_engine, cache_dir=tmp_path / "cache")
                    + _toml({"build": {"jobs": 2, "ccache": False}, "sandbox": {"mode": "none"},
                             "dispatch": {"mode": "serial"}, "report": {"enabled": False}}, more))
    cfg = load_config(path)
    with pytest.raises(NativeBuildError) as caught:
        evaluate(cfg)
    cause = caught.value.cause
    assert cause.startswith(says) and "\n" not in cause and "ninja: build stopped" not in cause, cause
    records = read_records(cfg.run.dir, dedupe=False)
    assert records.height == len(_jobs(cfg)) and records["job_id"].n_unique() == records.height
    assert records.select(pl.col("status").unique()).to_series().to_list() == ["harness_error"]
    assert set(records["error_message"]) == {cause}
    # the command itself: that line (and where the build's output is), exit code 2, and nothing recorded twice
    assert main(["eval", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"mkb: {cause}" in err.splitlines() and "Traceback" not in err
    assert read_records(cfg.run.dir, dedupe=False).height == 2 * records.height  # retried, recorded again


def _toml(base: dict, more: dict) -> str:
    """The sections of ``base`` with ``more``'s keys on top, as TOML after :func:`fixture_config_text`'s head,
    which ends in ``[mnn]``: its further keys first."""
    merged = {name: {**base.get(name, {}), **more.get(name, {})} for name in {**base, **more}}
    lines = [f"{k} = {toml_value(v)}" for k, v in merged.pop("mnn", {}).items()]
    for name, keys in merged.items():
        lines += [f"[{name}]"] + [f"{k} = {toml_value(v)}" for k, v in keys.items()]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("breakage, says", [
    ("no_bwrap", 'mkb: sandbox.mode = "bwrap": bubblewrap (bwrap) is not installed'),
    ("cache_is_a_file", "mkb: mnn.cache_dir: cannot write "),
])
def test_a_setup_refused_before_any_build_exits_2_without_a_traceback(breakage, says, tmp_path, fixture_engine,
                                                                      monkeypatch, capsys):
    """Setup errors that are the user's to fix (no bubblewrap with sandbox.mode = "bwrap", a cache folder that
    cannot be written): the one line, exit 2, each job one harness_error record (were a traceback, exit 1)."""
    from kit.host import sandbox, sandbox_check

    if breakage == "no_bwrap":
        monkeypatch.setattr(sandbox, "bwrap_path", lambda: None)
        sandbox_check.bwrap_works.cache_clear()
    else:
        (tmp_path / "cache").write_text("a file where the kit's cache folder should be")
    path = tmp_path / "cfg.toml"
    path.write_text(fixture_config_text(tmp_path / "run", source_dir=fixture_engine, cache_dir=tmp_path / "cache")
                    + _toml({"sandbox": {"mode": "bwrap"}, "dispatch": {"mode": "serial"},
                             "report": {"enabled": False}}, {}))
    try:
        assert main(["eval", "--config", str(path)]) == 2
    finally:
        sandbox_check.bwrap_works.cache_clear()
    err = capsys.readouterr().err
    assert any(line.startswith(says) for line in err.splitlines()) and "Traceback" not in err, err
    records = read_records(load_config(path).run.dir, dedupe=False)
    assert records.height == len(_jobs(load_config(path))) == records["job_id"].n_unique()
    assert records.select(pl.col("status").unique()).to_series().to_list() == ["harness_error"]
