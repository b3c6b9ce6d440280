"""The live progress bar of a run (rich): label, bar, done/total, elapsed, ETA and a status text with
per-stage counts (:class:`StageTally`); the same bar for one long build's steps (:class:`BuildProgress`).

Shown when stderr is a terminal (or ``MKB_PROGRESS=1``); without one (logs, CI) the run logs one line per
record (:func:`log_record`) and a long build one line every few percent.
"""

from __future__ import annotations

import collections
import logging
import os
import sys
from dataclasses import dataclass, field

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from kit.results.records import Record, Status

log = logging.getLogger("kit")


def job_progress(remaining: bool = True) -> Progress:
    """A :class:`rich.progress.Progress` drawn on stderr; add a task with a ``status`` field:
    ``add_task(label, total=n, status="")``.  ``MKB_PROGRESS=1`` draws it even when stderr is not a
    terminal (as terminal output: redraws with escape codes), e.g. under ``script`` or a CI log viewer.
    ``remaining``: rich's own ETA column (off: the caller says what is left in its status)."""
    forced = os.environ.get("MKB_PROGRESS") == "1"
    eta = [TextColumn("ETA"), TimeRemainingColumn()] if remaining else []
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        *eta,
        TextColumn("{task.fields[status]}"),
        console=Console(stderr=True, force_terminal=True if forced else None),
        disable=not progress_shown(),
    )


def progress_shown() -> bool:
    """Whether :func:`job_progress` draws: stderr is a terminal, or ``MKB_PROGRESS=1``."""
    return sys.stderr.isatty() or os.environ.get("MKB_PROGRESS") == "1"


def log_record(rec: Record) -> None:
    """Without a progress bar (nohup, CI, a cluster job): one INFO line per record, instead of the bar."""
    if progress_shown():
        return
    tries = f" ({rec.attempts} tries)" if rec.attempts > 1 else ""
    log.info("%s/%s/%s: %s%s %s", rec.task_id, rec.method, rec.sample_id, rec.status.value, tries,
             rec.error_message[:120])


def duration_text(seconds: float) -> str:
    """``45 s``, ``3 min 10 s``, ``1 h 05 min``: a wall time for a log line (rounded down to whole seconds)."""
    s = int(max(seconds, 0.0))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class StepRate:
    """The rate of a build's steps over its last ``window_s`` seconds, for an estimate of what is left: a build's
    pace changes (MNN's converter sources compile slower than its kernels), so the recent rate predicts better
    than the average since the start."""

    #: seconds of the build the rate is taken over (a shorter build: all of it)
    WINDOW_S = 120.0
    #: seconds of observation, and steps, before any estimate is given
    MIN_SPAN_S = 10.0

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self._seen: collections.deque[tuple[float, int]] = collections.deque()  # (elapsed_s, done), oldest first

    def add(self, done: int, elapsed_s: float) -> None:
        """Note ``done`` steps finished at ``elapsed_s`` seconds."""
        self._seen.append((elapsed_s, done))
        # keep one point at or before the window's start, so the rate spans the whole window
        while len(self._seen) > 2 and self._seen[1][0] <= elapsed_s - self.window_s:
            self._seen.popleft()

    def left_s(self, total: int) -> float | None:
        """Seconds until ``total`` steps at the recent rate; None before :data:`MIN_SPAN_S` seconds with a
        finished step have been seen, or when nothing is left."""
        if len(self._seen) < 2:
            return None
        (t0, d0), (t1, d1) = self._seen[0], self._seen[-1]
        if t1 - t0 < self.MIN_SPAN_S or d1 <= d0 or d1 >= total:
            return None
        return (total - d1) * (t1 - t0) / (d1 - d0)


def left_text(left_s: float | None) -> str:
    """``about 1 min 5 s left`` (:func:`duration_text`), "" without an estimate."""
    return "" if left_s is None else f"about {duration_text(left_s)} left"


class BuildProgress:
    """The progress of one long build (the native baseline: ~10 min for MNN), as a context manager whose value
    is the ``progress(done, total, elapsed_s)`` callback of :func:`kit.mnn.build.build` (steps finished and
    planned, seconds since the build began; called from the build's watch thread).

    With a progress bar (:func:`progress_shown`) it draws ``label``, bar, ``done/total``, elapsed and what is left
    (:class:`StepRate`); without one it logs (logger ``kit``, INFO) ``label: 412/558 steps (73 %), 3 min 10 s,
    about 1 min 5 s left`` each time ``done`` reaches a further multiple of ``log_every_pct`` percent of
    ``total``, and the last report on leaving if that one was not logged yet (a failed build ends short of
    100 %).  The estimate is left out until the rate is known (10 s with a finished step)."""

    def __init__(self, label: str, log_every_pct: int = 5) -> None:
        self.label = label
        self.log_every_pct = log_every_pct
        self.rate = StepRate()
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._next_pct = 0  # the next percentage that gets a log line
        self._last: tuple[int, int, float] | None = None
        self._logged = True

    def __enter__(self) -> BuildProgress:
        if progress_shown():
            self._bar = job_progress(remaining=False)  # rich's ETA column: the rate since the start
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
        elif self._last is not None and not self._logged:
            self._log(*self._last)

    def __call__(self, done: int, total: int, elapsed_s: float) -> None:
        self._last = (done, total, elapsed_s)
        self.rate.add(done, elapsed_s)
        if self._bar is not None:
            status = ", ".join(filter(None, ("steps", left_text(self.rate.left_s(total)))))
            if self._task is None:
                self._task = self._bar.add_task(self.label, total=total, status=status)
            self._bar.update(self._task, completed=done, total=total, status=status)
            return
        pct = 100 * done // total if total else 100
        self._logged = False
        if pct >= self._next_pct:
            self._log(done, total, elapsed_s)
            self._next_pct = (pct // self.log_every_pct + 1) * self.log_every_pct

    def _log(self, done: int, total: int, elapsed_s: float) -> None:
        pct = 100 * done // total if total else 100
        left = left_text(self.rate.left_s(total))
        log.info("%s: %d/%d steps (%d %%), %s%s", self.label, done, total, pct, duration_text(elapsed_s),
                 f", {left}" if left else "")
        self._logged = True


#: pipeline stages in order, and the stage each failing status stopped at
STAGES = ("build", "verify", "time")
_FAILED_AT = {
    Status.COMPILE_ERROR: "build",
    Status.COMPILE_TIMEOUT: "build",
    Status.VERIFY_MISMATCH: "verify",
    Status.RUNTIME_CRASH: "verify",
    Status.RUNTIME_TIMEOUT: "verify",
    Status.TIMING_FAILED: "time",
}


@dataclass
class StageTally:
    """Counts for the progress display: records per stage passed / failed, and other outcomes."""

    total: int
    done: int = 0
    failed: int = 0
    passed: collections.Counter = field(default_factory=collections.Counter)
    failed_at: collections.Counter = field(default_factory=collections.Counter)

    def add(self, rec: Record) -> None:
        self.done += 1
        if rec.status is not Status.OK:
            self.failed += 1
            self.failed_at[_FAILED_AT.get(rec.status, rec.status.value)] += 1
        if rec.compiled:
            self.passed["build"] += 1
        if rec.correct:
            self.passed["verify"] += 1
        if rec.status is Status.OK and rec.candidate_ms is not None:
            self.passed["time"] += 1

    def line(self, running: collections.Counter, waiting: int = 0) -> str:
        """Compact, for 80 columns: ``build ▶1 ✓20 ✗9 | verify ▶0 ✓12 ✗8 | time ▶1 ✓8 ✗0 ⏸2 | rejected_input 3``
        (▶ running, ✓ passed, ✗ failed at that stage, ⏸ built and waiting for a timing node)."""
        parts = []
        for st in STAGES:
            part = f"{st} ▶{running.get(st, 0)} ✓{self.passed[st]} ✗{self.failed_at[st]}"
            if st == "time" and waiting:
                part += f" ⏸{waiting}"
            parts.append(part)
        parts += [f"{k} {n}" for k, n in sorted(self.failed_at.items()) if k not in STAGES]
        return " | ".join(parts)


class LiveStatus:
    """The status text of a synchronous (serial) run, computed each time rich draws the bar (its refresh
    thread, ~10 times a second): ``label | tally line`` with the stage ``source.stage`` is in now counted
    as running, so the display follows a job through build / verify / time while it runs.

    Pass the object itself as the ``status`` field; rich formats it with ``str``."""

    def __init__(self, tally: StageTally, source: object) -> None:
        self.tally = tally
        self.source = source
        self.label = ""

    def __str__(self) -> str:
        stage = str(getattr(self.source, "stage", "") or "")
        line = self.tally.line(collections.Counter({stage: 1} if stage else {}))
        return f"{self.label} | {line}" if self.label else line

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)
