"""The per-stage counts of the live progress display (kit.host.progress.StageTally)."""

from __future__ import annotations

import collections

from kit.host.progress import StageTally
from kit.results.records import Record, Status


def _rec(status: Status, i: int, candidate_ms: float | None = None) -> Record:
    return Record(job_id=f"j{i}", method="m", task_id="t", sample_id=f"s{i}", candidate_sha256="x",
                  config_digest="d", status=status, candidate_ms=candidate_ms)


def test_tally_counts_passed_and_failed_per_stage():
    t = StageTally(total=9)
    statuses = [Status.OK, Status.OK, Status.COMPILE_ERROR, Status.COMPILE_TIMEOUT, Status.VERIFY_MISMATCH,
                Status.RUNTIME_CRASH, Status.TIMING_FAILED, Status.REJECTED_INPUT, Status.WORKER_LOST]
    for i, s in enumerate(statuses):
        t.add(_rec(s, i, candidate_ms=1.0 if i == 0 else None))  # the second ok ran without timing
    assert (t.done, t.failed) == (9, 7)
    # build passed: every compiled status (ok x2, verify_mismatch, runtime_crash, timing_failed)
    assert dict(t.passed) == {"build": 5, "verify": 3, "time": 1}
    assert dict(t.failed_at) == {"build": 2, "verify": 2, "time": 1, "rejected_input": 1, "worker_lost": 1}
    line = t.line(collections.Counter({"build": 1, "time": 1}), waiting=2)
    assert line == ("build ▶1 ✓5 ✗2 | verify ▶0 ✓3 ✗2 | time ▶1 ✓1 ✗1 ⏸2 | rejected_input 1 | worker_lost 1")


def test_live_status_follows_the_running_stage_when_the_bar_is_drawn():
    """The serial run sets the status once; rich's status column renders the stage the worker is in now."""
    from types import SimpleNamespace

    from kit.host.progress import LiveStatus, job_progress

    worker = SimpleNamespace(stage="")
    tally = StageTally(total=2)
    live = LiveStatus(tally, worker)
    progress = job_progress()
    progress.add_task("eval", total=2, status=live)
    column = progress.columns[-1]  # the status column, rendered as rich does on each refresh

    def shown() -> str:
        return column.render(progress.tasks[0]).plain

    live.label = "t1/m/s0"
    assert shown() == "t1/m/s0 | build ▶0 ✓0 ✗0 | verify ▶0 ✓0 ✗0 | time ▶0 ✓0 ✗0"
    worker.stage = "verify"
    assert shown() == "t1/m/s0 | build ▶0 ✓0 ✗0 | verify ▶1 ✓0 ✗0 | time ▶0 ✓0 ✗0"
    worker.stage = ""
    tally.add(_rec(Status.OK, 0, candidate_ms=2.0))
    live.label = ""
    assert shown() == "build ▶0 ✓1 ✗0 | verify ▶0 ✓1 ✗0 | time ▶0 ✓1 ✗0"


def test_mkb_progress_forces_a_terminal_bar_on_stderr(monkeypatch):
    from kit.host.progress import job_progress

    monkeypatch.setenv("MKB_PROGRESS", "1")
    p = job_progress()
    assert not p.disable and p.console.is_terminal and p.console.stderr
    monkeypatch.delenv("MKB_PROGRESS")
    assert job_progress().console.stderr
