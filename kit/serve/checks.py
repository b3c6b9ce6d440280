"""The checks ``mkb serve`` knows: each :class:`Check`, the indexes that answer identical submissions at once and
refuse a reused sample id, the bounded queue of checks waiting for a worker, and the times to verdict
(:class:`Registry`).  No I/O: the engine (:mod:`kit.serve.engine`) does that.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kit.job.record import Job
from kit.results.records import Record
from kit.results.rules import RETRIED
from kit.serve.models import CheckView, Stats
from kit.serve.verdict import finished

if TYPE_CHECKING:
    from kit.job.worker import Worker
    from kit.serve.lane import JournalEntry, Lane

#: Retry-After (seconds) of a full queue before any check has finished
DEFAULT_RETRY_S = 10
#: finished checks whose times the statistics keep
KEEP_TIMES = 2000


class QueueFull(Exception):
    """The queue holds ``limit`` checks; ``retry_after_s``: when a worker is likely to have taken one."""

    def __init__(self, limit: int, retry_after_s: int) -> None:
        super().__init__(f"the queue is full ({limit} checks wait); retry after {retry_after_s} s")
        self.retry_after_s = retry_after_s


class SampleConflict(Exception):
    """A (method, task, sample id) already names another candidate (a run scores each sample once)."""


@dataclass(eq=False)
class Check:
    """One accepted check.  ``job`` is None for a check restored finished from the run directory's records."""

    id: str
    task_id: str
    method: str
    sample_id: str
    sha256: str
    lane: Lane
    job: Job | None = None
    #: its journal line while it has to run (None: restored finished, or refused before any build)
    entry: JournalEntry | None = None
    state: str = "queued"
    accepted_s: float = field(default_factory=time.monotonic)
    started_s: float | None = None
    record: Record | None = None
    #: the worker running it (its ``stage`` is the check's)
    place: Worker | None = None
    result: dict[str, Any] = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)

    def reusable(self) -> bool:
        """An identical submission may be answered by this check: it is not finished as a harness error."""
        return self.record is None or self.record.status not in RETRIED

    def view(self, position: int | None = None, cached: bool = False) -> CheckView:
        """The check as the service returns it (``position``: checks before it in the queue)."""
        stage = self.place.stage if self.place is not None and self.state == "running" else ""
        if self.record is not None and not self.result:  # a restored check's verdict, made when first asked
            self.result = finished(self.record)
        return CheckView(id=self.id, task_id=self.task_id, method=self.method, sample_id=self.sample_id,
                         timing=self.lane.timing, state=self.state, stage=stage, queue_position=position,
                         cached=cached, **self.result)  # type: ignore[arg-type]


class Registry:
    """Checks by id, by candidate ((digest, task id, candidate sha256): the cache) and by sample ((digest,
    method, task id, sample id) → sha256: conflicts); the queue (at most ``limit`` waiting); times to verdict.
    Thread-safe: every method takes :attr:`cond`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.cond = threading.Condition()
        self.checks: dict[str, Check] = {}
        self._by_candidate: dict[tuple[str, str, str], str] = {}
        self._samples: dict[tuple[str, str, str, str], str] = {}
        self._queue: deque[Check] = deque()
        self._times: deque[tuple[float, float, float | None]] = deque(maxlen=KEEP_TIMES)
        self.cache_hits = 0
        self.done = 0
        self.running = 0
        self.closing = False

    def known(self, digest: str, task_id: str, sha256: str, method: str, sample_id: str) -> Check | None:
        """The check that answers an identical submission (same digest, task and candidate), if any.  A
        submission answered from the cache still claims its ``(method, task_id, sample_id)`` for this candidate:
        one sample id names one candidate whichever of two concurrent submissions was accepted first.

        Raises:
            SampleConflict: ``(method, task_id, sample_id)`` names another candidate under ``digest``."""
        with self.cond:
            key = (digest, method, task_id, sample_id)
            other = self._samples.get(key)
            if other is not None and other != sha256:
                raise SampleConflict(f"sample_id: {method}/{task_id}/{sample_id} is already another candidate "
                                     f"(sha256 {other[:16]}); give each candidate its own sample id")
            hit = self.checks.get(self._by_candidate.get((digest, task_id, sha256), ""))
            if hit is None or not hit.reusable():
                return None
            self.cache_hits += 1
            self._samples[key] = sha256
            return hit

    def room(self) -> None:
        """Refuse a check when the queue is full.

        Raises:
            QueueFull: the queue holds :attr:`limit` checks."""
        with self.cond:
            if len(self._queue) >= self.limit:
                raise QueueFull(self.limit, self._retry_after_s())

    def add(self, check: Check, queued: bool = True) -> None:
        """Index ``check``; ``queued``: put it at the end of the queue (however full: :meth:`room` refuses)."""
        with self.cond:
            self.checks[check.id] = check
            self._by_candidate[(check.lane.digest, check.task_id, check.sha256)] = check.id
            self._samples[(check.lane.digest, check.method, check.task_id, check.sample_id)] = check.sha256
            if queued:
                self._queue.append(check)
                self.cond.notify()

    def restore(self, rec: Record, lane: Lane) -> None:
        """Index the finished check of ``rec`` (a record of ``lane``'s run directory)."""
        check = Check(rec.job_id, rec.task_id, rec.method, rec.sample_id, rec.candidate_sha256, lane, state="done",
                      record=rec)
        check.done.set()
        self.add(check, queued=False)

    def take(self) -> Check | None:
        """The next queued check, marked running (blocks while the queue is empty); None once closing."""
        with self.cond:
            while not self._queue and not self.closing:
                self.cond.wait()
            if self.closing:
                return None
            check = self._queue.popleft()
            check.state, check.started_s = "running", time.monotonic()
            self.running += 1
            return check

    def finish(self, check: Check, rec: Record) -> None:
        """Mark ``check`` done with ``rec``; its times go into the statistics."""
        result = finished(rec)
        with self.cond:
            if check.state == "running":
                self.running -= 1
            check.record, check.result, check.state, check.place = rec, result, "done", None
            self.done += 1
            now = time.monotonic()
            run_s = None if check.started_s is None else now - check.started_s  # None: never ran (refused)
            self._times.append((now, now - check.accepted_s, run_s))
        check.done.set()

    def pending(self, lane: Lane) -> list[Check]:
        """The checks of ``lane`` queued or running."""
        with self.cond:
            return [c for c in self.checks.values() if c.lane is lane and c.state != "done"]

    def position(self, check: Check) -> int | None:
        """Checks before ``check`` in the queue (None when it is not queued)."""
        with self.cond:
            return self._queue.index(check) if check.state == "queued" and check in self._queue else None

    def close(self) -> None:
        """Wake every waiting worker: :meth:`take` returns None from now on."""
        with self.cond:
            self.closing = True
            self.cond.notify_all()

    def _retry_after_s(self) -> int:
        """Seconds until a worker is likely to take a queued check: the median run time of the checks so far."""
        runs = [run_s for _, _, run_s in self._times if run_s is not None]
        return max(1, math.ceil(float(np.median(runs)))) if runs else DEFAULT_RETRY_S

    def stats(self, workers: int) -> Stats:
        """The service's figures (:class:`kit.serve.models.Stats`)."""
        with self.cond:
            now = time.monotonic()
            to_verdict = [t for _, t, _ in self._times]
            recent = sum(1 for end, _, _ in self._times if now - end <= 60.0)
            p50, p95 = (np.percentile(to_verdict, [50, 95]).tolist() if to_verdict else (None, None))
            return Stats(queue_depth=len(self._queue), queue_limit=self.limit, running=self.running,
                         workers=workers, done=self.done, cache_hits=self.cache_hits,
                         verdicts_per_min=float(recent), time_to_verdict_p50_s=p50, time_to_verdict_p95_s=p95)
