"""Where a job's wall time goes: a clock that charges every second of the job to exactly one phase.

The job starts in phase ``setup``; :func:`charged` moves the clock to another phase for a block and back after
it, :func:`waiting` charges the wait for a lock (the node's gate, an adb device) to ``lock_wait`` whatever phase
asked for it, and so are the seconds a command of the job was stopped while another process timed
(:mod:`kit.host.nodelock`).  The phases are disjoint and together cover the job from its start to its record, so their sum is
the job's ``wall_s`` (less the record's own assembly, charged to ``record`` by the pipeline).  The stage times of a
record (``build_s``, ``verify_s``, ``timing_s``) are the stages' own measurements; a phase of the same name also
holds what surrounds the stage's command (its Python, the files it reads and writes).

The clock of the job running in this thread is a context variable (:func:`job_clock`): the stages' helpers
charge it without passing it around, and outside a job :func:`charged` and :func:`waiting` only run their block.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import TypeVar

from kit.host import proc
from kit.results.records import PHASE_NAMES

__all__ = ["Clock", "charged", "exit_charged", "job_clock", "waiting"]

T = TypeVar("T")

_clock: contextvars.ContextVar[Clock | None] = contextvars.ContextVar("mkb_job_clock", default=None)


class Clock:
    """Seconds per phase (:data:`kit.results.records.PHASE_NAMES`) into ``seconds`` (name → seconds, added to what
    it holds: the timing half of a job split over two nodes adds to its build half's)."""

    def __init__(self, seconds: dict[str, float], first: str = "setup") -> None:
        self.seconds = seconds
        self.current = first
        self._since = time.monotonic()

    def switch(self, name: str) -> str:
        """Charge the seconds since the last switch to the current phase and make ``name`` current; returns the
        phase it left.

        Raises:
            ValueError: ``name`` is not a phase."""
        if name not in PHASE_NAMES:
            raise ValueError(f"unknown job phase {name!r} (known: {', '.join(PHASE_NAMES)})")
        now = time.monotonic()
        self.seconds[self.current] = self.seconds.get(self.current, 0.0) + (now - self._since)
        self._since, left, self.current = now, self.current, name
        return left

    def move(self, seconds: float, to: str) -> None:
        """Charge ``seconds`` just spent in the current phase (within its running stretch: e.g. a command paused
        inside it) to phase ``to`` instead."""
        self.seconds[to] = self.seconds.get(to, 0.0) + seconds
        self._since += seconds

    def stop(self) -> dict[str, float]:
        """Charge the current phase up to now; returns ``seconds``."""
        self.switch(self.current)
        return self.seconds


@contextmanager
def job_clock(seconds: dict[str, float]) -> Iterator[Clock]:
    """The clock of the job run in the block (``seconds``: where its phases go), stopped when the block ends."""
    clock = Clock(seconds)
    token = _clock.set(clock)
    try:
        # a command of the job stopped while another process times (kit.host.nodelock) waits for that lock too
        with proc.pauses_reported(lambda s: clock.move(s, "lock_wait")):
            yield clock
    finally:
        clock.stop()
        _clock.reset(token)


@contextmanager
def charged(name: str) -> Iterator[None]:
    """The block's seconds charged to phase ``name`` (then back to the phase before it); outside a job, nothing."""
    clock = _clock.get()
    if clock is None:
        yield
        return
    left = clock.switch(name)
    try:
        yield
    finally:
        clock.switch(left)


@contextmanager
def waiting(hold: AbstractContextManager[T]) -> Iterator[T]:
    """Enter ``hold`` (a lock's context manager) with the wait charged to ``lock_wait``, then hold it for the
    block, whose seconds go to the phase that asked."""
    with ExitStack() as stack:
        with charged("lock_wait"):
            value = stack.enter_context(hold)
        yield value


@contextmanager
def exit_charged(name: str, cm: AbstractContextManager[T]) -> Iterator[T]:
    """``cm`` entered in the current phase, its exit (e.g. restoring what it changed) charged to ``name``."""
    clock = _clock.get()
    left: list[str] = []
    with ExitStack() as stack:
        stack.callback(lambda: clock.switch(left.pop()) if clock is not None and left else None)
        value = stack.enter_context(cm)
        stack.callback(lambda: left.append(clock.switch(name)) if clock is not None else None)
        yield value
