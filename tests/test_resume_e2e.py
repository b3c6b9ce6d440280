"""``mkb eval`` with the real pipeline, its driver SIGKILLed mid-run, finishes when the same command is run
again: every job recorded exactly once, none lost, and the statuses and metrics of an uninterrupted run.

Unlike ``tests/test_resume.py`` (an injected per-job function) this runs the real command,
``python -m kit.cli eval --config CFG``, i.e. :func:`kit.evaluate.evaluate` on a :class:`kit.dispatch.RayExecutor`
with its default setup (:func:`kit.worker.setup_worker`: pristine tree, locked workspace ``w<i>``, native build) and
:func:`kit.pipeline.run_job` (register, build, convert, verify, time) on the fixture engine's sample
candidates, with ``dispatch.mode = "ray"`` and no address (an embedded Ray started by the driver).

Order: an uninterrupted run into one run directory (``--run.dir``; it also does the one-time setup of the
cache: native build, workspaces), then the run to be killed into another on the same cache, SIGKILLed once
at least one record is in its shards, then the same command again.

Run inside a private network namespace::

    unshare -n sh -c 'ip link set lo up; .venv/bin/pytest tests/test_resume_e2e.py -q'
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import pytest
from conftest_fixture import fixture_config_text

from kit import proc
from kit.config import load_config
from kit.records import Status

pytestmark = pytest.mark.slow

FIXTURE_ROOT = Path(__file__).resolve().parent / "fixture_engine"
#: the repository whose ``kit`` is under test (driver and Ray workers import it from here)
REPO_ROOT = Path(__file__).resolve().parents[1]
#: the status every sample of the fixture engine must get, whichever run evaluates it
EXPECTED = {
    "correct": Status.OK,
    "compile_error": Status.COMPILE_ERROR,
    "wrong_result": Status.VERIFY_MISMATCH,
    "crash": Status.RUNTIME_CRASH,
}
#: per-method metrics compared between the resumed and the uninterrupted run (see the test for why only these)
STABLE_METRICS = ("n_tasks", "n_missing", "n_compiled", "n_correct", "n_with_speedup", "n_no_native", "csr", "fcr",
                  "fast_0", "pass@1", "no_native_tasks")
#: generous: a cold setup (native build, two workspaces) on a loaded 2-core machine takes about a minute
SETUP_S = 400
#: how long processes of a finished or killed run may take to end by themselves
GONE_S = 90


def _config(tmp: Path, engine: Path) -> Path:
    path = tmp / "cfg.toml"
    path.write_text(
        fixture_config_text("run", source_dir=engine, cache_dir="cache")
        + """
[build]
jobs = 2
[verify]
trials = 3
[timing]
warmup = 2
iterations = 20
rounds = 2
[dispatch]
mode = "ray"
workers = 2
[report]
enabled = true
"""
    )
    return path


def _procs_mentioning(*texts: str) -> dict[int, str]:
    """Live processes (not this one) whose command line or environment contains one of ``texts``: pid →
    command line.

    Only a read-only look at /proc; ``texts`` are this test's private temporary paths, so every match is a
    process this test started (directly or through the kit and Ray; Ray's agents rename themselves, so their
    environment is read too).
    """
    found = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmdline = (d / "cmdline").read_bytes()
            environ = (d / "environ").read_bytes()
        except OSError:
            continue
        if any(t.encode() in cmdline or t.encode() in environ for t in texts):
            found[int(d.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace")[:300]
    return found


def _wait_gone(texts: tuple[str, ...]) -> dict[int, str]:
    """Poll until no process mentions ``texts`` (at most :data:`GONE_S`); returns those still alive."""
    deadline = time.monotonic() + GONE_S
    while (left := _procs_mentioning(*texts)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def _log(path: Path) -> str:
    return path.read_text(errors="replace")[-4000:] if path.exists() else ""


def test_real_eval_driver_sigkill_then_rerun_matches_uninterrupted_run(tmp_path, fixture_engine):
    from kit import headline, metrics
    from kit.jobs import make_jobs
    from kit.shards import RESULTS_FILE, scan, shard_paths
    from kit.tasks import load_suite

    cfg_path = _config(tmp_path, fixture_engine)
    cfg = load_config(cfg_path)
    tasks = load_suite(cfg.tasks.dir, "all")
    jobs, orphans = make_jobs(cfg, tasks, {t.id for t in tasks}, None)
    job_ids = sorted(j.job_id for j in jobs)
    assert len(job_ids) == len(set(job_ids)) == len(tasks) * len(EXPECTED) >= 16 and orphans == []
    expected_status = {j.job_id: EXPECTED[j.sample_id].value for j in jobs}
    run_dir, ref_dir = cfg.run.dir, tmp_path / "reference"

    ray_tmp = Path(tempfile.mkdtemp(prefix="mkbe", dir="/tmp"))  # short: Ray's unix socket paths
    # a minimal environment: no MKB_* of the caller (MKB_MNN__SOURCE_DIR would replace the fixture engine)
    env = proc.base_env({"HOME": str(tmp_path / "home"), "RAY_TMPDIR": str(ray_tmp), "RAY_USAGE_STATS_ENABLED": "0",
                         "PYTHONPATH": str(REPO_ROOT)})
    argv = [sys.executable, "-m", "kit.cli", "eval", "--config", str(cfg_path)]
    # every process of the runs below names one of these in its command line (Ray's: ray_tmp; the driver,
    # builds, converter and runner: a path under tmp_path; the "/" keeps tmp_path "..._1" from matching "..._10")
    ours = (str(ray_tmp), f"{tmp_path}/")
    out1, err1 = tmp_path / "killed.out", tmp_path / "killed.err"
    killed = None
    try:
        # 1. the uninterrupted run, into another run directory (it also does the one-time setup of the cache)
        ref = proc.run([*argv, "--run.dir", str(ref_dir)], cwd=tmp_path, env=env, timeout_s=900)
        assert ref.returncode == 0, ref.output[-4000:]
        assert f"{len(job_ids)} jobs, 0 already recorded" in ref.stdout, ref.stdout[-2000:]
        assert _wait_gone(ours) == {}, "the finished run left processes behind"

        # 2. the run to be killed, in a session of its own; SIGKILL the driver (only) once a record is in
        # its shards
        with open(out1, "wb") as o, open(err1, "wb") as e:
            killed = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=o, stderr=e, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        deadline = time.monotonic() + SETUP_S  # the cache is warm now; still generous
        while not shard_paths(run_dir):
            assert killed.poll() is None, f"driver ended before it could be killed:\n{_log(out1)}\n{_log(err1)}"
            assert time.monotonic() < deadline, f"no record within {SETUP_S} s:\n{_log(err1)}"
            time.sleep(0.05)
        os.kill(killed.pid, signal.SIGKILL)
        assert killed.wait(60) == -signal.SIGKILL
        partial = scan(run_dir, dedupe=False).collect()
        assert 1 <= partial.height < len(job_ids), "the kill must land mid-run"
        assert partial["job_id"].n_unique() == partial.height
        assert "CSR" not in _log(out1)  # it never reached the summary

        # The killed driver's embedded Ray (and its workers, which hold the workspace locks) shares its fate.
        # The builds a worker was running (ninja, c++, in sessions of their own) are orphaned and go on
        # writing into the workspace until they end by themselves.  The rerun must start beside none of them
        # (a leftover worker would hold w<i>; a leftover ninja would race the next job's build in w<i>).
        assert (left := _wait_gone(ours)) == {}, f"processes of the killed run outlived it: {left}"

        # 3. the same command again: skips the recorded jobs, runs the rest
        second = proc.run(argv, cwd=tmp_path, env=env, timeout_s=900)
        assert second.returncode == 0, second.output[-4000:]
        assert f"{len(job_ids)} jobs, {partial.height} already recorded" in second.stdout, second.stdout[-2000:]
    finally:
        if killed is not None and killed.poll() is None:
            killed.kill()
            killed.wait()
        for pid in _procs_mentioning(*ours):  # only what this test started (its private temp paths)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(ray_tmp, ignore_errors=True)

    # every job recorded exactly once (no duplicate, none lost), each on its first try
    rows = scan(run_dir, dedupe=False).collect()
    assert sorted(rows["job_id"].to_list()) == job_ids
    assert set(rows["attempts"].to_list()) == {1}
    # the records written before the kill are kept as they were, not re-run
    kept = rows.join(partial.select("job_id", "started_at", "worker"), on="job_id", how="semi")
    assert kept.select("job_id", "started_at", "worker").sort("job_id").equals(
        partial.select("job_id", "started_at", "worker").sort("job_id"))
    # provenance: the killed session's values stay on top, both sessions listed, nothing differs between them
    prov = json.loads((run_dir / "provenance.json").read_text())
    assert len(prov["sessions"]) == 2 and prov["started_at"] == prov["sessions"][0]["started_at"]
    assert "differs" not in prov, prov.get("differs")
    ref_rows = scan(ref_dir, dedupe=False).collect()
    assert sorted(ref_rows["job_id"].to_list()) == job_ids

    # the merged tables (results.parquet, written at the end of each run) hold the same jobs
    got = pl.read_parquet(run_dir / RESULTS_FILE)
    want = pl.read_parquet(ref_dir / RESULTS_FILE)
    assert sorted(got["job_id"].to_list()) == sorted(want["job_id"].to_list()) == job_ids

    # the same status per job in both runs, and the one the fixture sample is made to get
    got_status = dict(zip(got["job_id"].to_list(), got["status"].to_list(), strict=True))
    want_status = dict(zip(want["job_id"].to_list(), want["status"].to_list(), strict=True))
    why = {(r["task_id"], r["sample_id"]): (r["status"], r["error_message"][:300])
           for r in pl.concat([got, want]).iter_rows(named=True) if r["status"] != expected_status[r["job_id"]]}
    assert got_status == want_status == expected_status, why

    # The same metrics.  Only those that do not depend on measured times are compared: CSR, FCR, pass@1, the
    # counts, and fast_0 (speedup > 0 holds for every positive timing, so fast_0 follows from the statuses and
    # the no-native rule).  fast_p for p > 0 is not: the fixture's kernels are not built to be faster or
    # slower than its native ones by any margin, and two uninterrupted runs measured fx_exp at 1.18x and
    # 1.14x, fx_transpose at 0.95x and 0.97x, fx_argmax at 0.14x and 0.26x, i.e. within timing noise of
    # p = 1.0 (and not far from 0.5): fast_1.0 came out 25 % in some runs of this config and 50 % in another,
    # so comparing it (or geomean) would compare timing noise, not the resume.
    s_got = metrics.summary(got, tasks, by=("method",), n_boot=100)
    s_want = metrics.summary(want, tasks, by=("method",), n_boot=100)
    assert s_got["method"].to_list() == s_want["method"].to_list() == ["sample"]
    assert s_got.select(STABLE_METRICS).to_dicts() == s_want.select(STABLE_METRICS).to_dicts()
    n = len(tasks)
    assert s_got.select("csr", "fcr", "n_no_native").row(0) == (1.0, 1.0, 1)  # fx_sub: no native converter
    assert s_got["fast_0"].item() == (n - 1) / n
    # what the rerun printed is the headline of its merged records
    assert headline.headline(got, tasks, cfg.report.fast_p) in second.stdout
    assert (run_dir / "report" / "report.html").is_file()
