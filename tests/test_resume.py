"""A distributed eval whose driver is SIGKILLed mid-run finishes when the same command is run again:
every job recorded exactly once, and the same metrics as an uninterrupted evaluation of the same jobs.

The driver is this file run as a script (``python tests/test_resume.py drive CFG PIDFILE``): it calls
:func:`kit.outline.evaluate.evaluate` on a :class:`kit.dispatch.RayExecutor` with ``dispatch.mode = "ray"`` and no
address, i.e. an embedded Ray started by the driver, on the jobs :func:`kit.run.plan.make_jobs` makes from the fixture engine's
sample candidates.  The per-job work is the module-level :func:`work` below (a deterministic verdict from
the sample name, after a short sleep); the workers' setup takes a per-index lock the way a workspace does,
so a worker that outlived its killed driver would make the rerun fail.

Run inside a private network namespace::

    unshare -n sh -c 'ip link set lo up; .venv/bin/pytest tests/test_resume.py -q'
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest_fixture import fixture_config_text

from kit.host import proc
from kit.job.record import Job
from kit.results.records import Record, Status
from kit.settings.config import EvalConfig, load_config

FIXTURE_ROOT = Path(__file__).resolve().parent / "fixture_engine"
#: seconds each job sleeps in the driver subprocess (so that the kill lands mid-run)
JOB_SLEEP_S = 1.0
VERDICTS = {"correct": Status.OK, "compile_error": Status.COMPILE_ERROR, "wrong_result": Status.VERIFY_MISMATCH,
            "crash": Status.RUNTIME_CRASH}


def setup_state(cfg: EvalConfig, index: int, name: str) -> dict:
    """Lock ``w<index>`` in the cache dir without waiting (raises BlockingIOError if a live worker holds it)."""
    cfg.mnn.cache_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(cfg.mnn.cache_dir / f"w{index}.lock", os.O_CREAT | os.O_RDWR, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return {"name": name, "fd": fd}


def work(job: Job, state: dict) -> Record:
    """A deterministic verdict from the sample name; ``correct`` gets a speedup from the candidate hash."""
    started = datetime.now(UTC).isoformat(timespec="microseconds")
    time.sleep(float(os.environ.get("MKB_TEST_JOB_SLEEP_S", "0")))
    status = VERDICTS.get(job.sample_id, Status.HARNESS_ERROR)
    ok = status is Status.OK
    speedup = 0.5 + int(job.candidate_sha256[:4], 16) / 65536 * 2 if ok else None
    t = job.task
    return Record(
        job_id=job.job_id, method=job.method, task_id=t.id, sample_id=job.sample_id,
        candidate_sha256=job.candidate_sha256, config_digest=job.config_digest, category=t.category,
        op_type=t.op_type, mechanism=t.mechanism, split=t.split, status=status,
        native_ms=1.0 if ok else None, candidate_ms=1.0 / speedup if ok else None, speedup=speedup,
        host=socket.gethostname(), worker=state["name"], started_at=started,
    )


def drive(cfg_path: str, pid_file: str) -> int:
    from kit.dispatch import RayExecutor
    from kit.outline.evaluate import evaluate

    Path(pid_file).write_text(str(os.getpid()))
    cfg = load_config(cfg_path)
    return evaluate(cfg, RayExecutor(cfg, setup_fn=setup_state, job_fn=work))


# -- the test -----------------------------------------------------------------------------------------------
def _config(tmp: Path) -> Path:
    path = tmp / "cfg.toml"
    path.write_text(
        fixture_config_text("run", cache_dir="cache")
        + """
[dispatch]
mode = "ray"
workers = 2
"""
    )
    return path


def _procs_mentioning(text: str) -> list[int]:
    """Pids of live processes whose command line or environment contains ``text`` (read-only look at /proc;
    the environment too: Ray's agents rename themselves ``ray::DashboardAgent``, but inherit RAY_TMPDIR)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if text.encode() in (d / "cmdline").read_bytes() or text.encode() in (d / "environ").read_bytes():
                    pids.append(int(d.name))
            except OSError:
                pass
    return pids


def _cmdline(pid: int) -> str:
    """``pid``'s command line, parent and whether it carries a reaper's mark (what a leftover is, for the failure
    message)."""
    try:
        d = Path(f"/proc/{pid}")
        cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()[:120]
        ppid = (d / "stat").read_text().rsplit(")", 1)[1].split()[1]
        marked = b"MKB_SESSION_MARK=" in (d / "environ").read_bytes()
        return f"{cmd} (parent {ppid}, {'marked' if marked else 'not marked'})"
    except (OSError, IndexError):
        return "(gone)"


@pytest.mark.slow
def test_driver_sigkill_then_rerun_finishes(tmp_path):
    from kit.results.shards import ShardWriter, scan, shard_paths
    from kit.run.plan import make_jobs
    from kit.score import headline
    from kit.suite.tasks import load_suite

    cfg_path = _config(tmp_path)
    cfg = load_config(cfg_path)
    tasks = load_suite(cfg.tasks.dir, "all")
    jobs, orphans = make_jobs(cfg, tasks, {t.id for t in tasks}, None)
    assert len(jobs) >= 8 and orphans == []
    ray_tmp = Path(tempfile.mkdtemp(prefix="mkbq", dir="/tmp"))  # short: Ray's unix socket paths
    env = proc.base_env({"HOME": str(tmp_path / "home"), "RAY_TMPDIR": str(ray_tmp), "RAY_USAGE_STATS_ENABLED": "0",
                         "MKB_TEST_JOB_SLEEP_S": str(JOB_SLEEP_S), "PYTHONPATH": str(Path(__file__).parent)})
    argv = [sys.executable, __file__, "drive", str(cfg_path)]
    # setsid: the driver (and the Ray it embeds) in a session of its own, so kit.host.proc.run's clean-up of
    # its child's process group cannot stand in for Ray's own fate sharing with a killed driver
    first: dict = {}
    t = threading.Thread(
        target=lambda: first.update(r=proc.run(["setsid", "-w", *argv, str(tmp_path / "pid1")], env=env, timeout_s=600))
    )
    try:
        t.start()
        run_dir = cfg.run.dir
        end = time.monotonic() + 400
        while len(shard_paths(run_dir)) < 3:
            assert t.is_alive(), f"driver ended before it could be killed: {first['r'].output[-3000:]}"
            assert time.monotonic() < end, "no records within 400 s"
            time.sleep(0.05)
        os.kill(int((tmp_path / "pid1").read_text()), signal.SIGKILL)
        t.join(120)
        assert not t.is_alive()
        partial = scan(run_dir, dedupe=False).collect()
        assert 3 <= partial.height < len(jobs), "the kill must land mid-run"

        # the embedded Ray shares the driver's fate: its processes (and the workers' locks) go away
        end = time.monotonic() + 60
        while _procs_mentioning(str(ray_tmp)) and time.monotonic() < end:
            time.sleep(0.5)
        left = {pid: _cmdline(pid) for pid in _procs_mentioning(str(ray_tmp))}
        assert left == {}, f"Ray processes outlived the killed driver: {left}"

        second = proc.run(argv + [str(tmp_path / "pid2")], env=env, timeout_s=600)
        assert second.ok, second.output[-4000:]
        assert f"{partial.height} already recorded" in second.stdout
    finally:
        for pid in _procs_mentioning(str(ray_tmp)):  # only what this test started (its private temp dir)
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(ray_tmp, ignore_errors=True)

    rows = scan(run_dir, dedupe=False).collect()
    assert sorted(rows["job_id"].to_list()) == sorted(j.job_id for j in jobs)  # every job exactly once
    assert set(rows["attempts"].to_list()) == {1}

    # the same metrics as an uninterrupted evaluation of the same jobs
    ref_dir = tmp_path / "reference"
    with ShardWriter(ref_dir, "ref", flush_every=len(jobs)) as w:
        for j in jobs:
            w.append(work(j, {"name": "ref"}))
    got, ref = scan(run_dir).collect(), scan(ref_dir).collect()
    key = ["job_id", "status", "speedup"]
    assert got.select(key).sort("job_id").equals(ref.select(key).sort("job_id"))
    assert headline.headline(got, tasks) == headline.headline(ref, tasks)
    assert headline.headline(got, tasks) in second.stdout


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "drive":
        sys.exit(drive(sys.argv[2], sys.argv[3]))
    sys.exit(f"usage: {sys.argv[0]} drive CONFIG PIDFILE")
