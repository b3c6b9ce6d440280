"""Task affinity of the pending-job queue (kit.run.queue)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kit.run.queue import JobQueue


def _job(task: str, n: int):
    # JobQueue reads job.task.id only
    return SimpleNamespace(task=SimpleNamespace(id=task), name=f"{task}{n}")


def _names(jobs) -> list[str]:
    return [j.name for j in jobs]


# method-major order as make_jobs gives it: every task once per method
ORDER = [_job(t, m) for m in range(3) for t in ("a", "b", "c")]


def test_one_worker_runs_each_task_in_one_stretch_in_first_seen_order():
    assert _names(JobQueue(ORDER)) == ["a0", "a1", "a2", "b0", "b1", "b2", "c0", "c1", "c2"]
    q, last, got = JobQueue(ORDER), None, []
    while q:
        job = q.take(last)
        last = job.task.id
        got.append(job.name)
    assert got == _names(JobQueue(ORDER)) and len(q) == 0


def test_two_workers_keep_apart_and_keep_their_task():
    q = JobQueue(ORDER)
    w0 = q.take(None, set())
    w1 = q.take(None, {w0.task.id})
    assert (w0.name, w1.name) == ("a0", "b0")
    assert q.take("a", {"b"}).name == "a1"  # the same task again while one is pending
    assert q.take("b", {"a"}).name == "b1"
    assert q.take("a", {"b"}).name == "a2"
    assert q.take("a", {"b"}).name == "c0"  # a is done: the first task nobody is on
    assert q.take("b", {"c"}).name == "b2"
    assert q.take("b", {"c"}).name == "c1"  # everything left is another worker's task: take it anyway
    assert len(q) == 1 and _names(q) == ["c2"]


def test_a_retried_job_comes_back_first():
    q = JobQueue(ORDER)
    first = q.take()
    q.take("a")
    q.appendleft(first)
    assert q.take(None, {"a"}).name == "b0"  # another worker on a: the retry waits for a worker without a task
    assert q.take().name == "a0" and len(q) == 6


def test_empty_queue_raises():
    q = JobQueue([])
    assert not q and len(q) == 0
    with pytest.raises(IndexError, match="empty"):
        q.take()
