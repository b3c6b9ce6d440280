"""Pausing running commands while a timing phase has the node: the hook :func:`pausable` installs for the
calling thread and the wait that polls it (:func:`_await_pausable`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol


class Pausable(Protocol):
    """What :func:`run` polls while a command runs inside :func:`pausable` (:class:`kit.host.nodelock.NodeLock`'s
    shared hold implements it)."""

    def requested(self) -> bool:
        """True when the command should pause now."""
        ...

    def pause(self, sid: int) -> float:
        """Stop every process of session ``sid``, block until it may go on, continue it; return the seconds
        it was stopped.  If this raises, the session must be left killed, not running."""
        ...


#: per thread: the pause hook of the innermost :func:`pausable` block (thread-local, never copied into
#: another thread's context)
_hooks = threading.local()
#: seconds between two polls of the pause hook while a command runs
PAUSE_POLL_S = 0.02


@contextmanager
def pausable(hook: Pausable) -> Iterator[None]:
    """Commands :func:`run` starts in this thread inside the block poll ``hook`` every :data:`PAUSE_POLL_S`
    seconds and call ``hook.pause(session id)`` when ``hook.requested()``.  The paused seconds extend the
    command's timeout and are reported as ``ProcResult.paused_s``."""
    previous = getattr(_hooks, "hook", None)
    _hooks.hook = hook
    try:
        yield
    finally:
        _hooks.hook = previous


@contextmanager
def pauses_reported(listener: Callable[[float], None]) -> Iterator[None]:
    """``listener(seconds)`` is called in this thread after each pause of a command :func:`run` runs in the block
    (the job's phase clock, :mod:`kit.job.phases`: the seconds go to its lock waits)."""
    previous = getattr(_hooks, "listener", None)
    _hooks.listener = listener
    try:
        yield
    finally:
        _hooks.listener = previous


def _current_hook() -> Pausable | None:
    """The hook of the innermost :func:`pausable` block of this thread (None outside one)."""
    return getattr(_hooks, "hook", None)


def _await_pausable(
    sid: int, done: Callable[[float], bool], timeout_s: float | None, hook: Pausable | None,
    stop: Callable[[float], bool] | None = None,
) -> tuple[bool, float]:
    """Wait until ``done(wait_s)`` (which itself waits up to ``wait_s`` seconds) returns True or ``timeout_s``
    seconds of running (not paused) time have passed.  ``hook`` is polled first and then every
    :data:`PAUSE_POLL_S`: a command started while a timing phase waits is paused at once, not a poll later.
    ``stop(running_s)``, asked as often with the seconds of running (not paused) time so far, ends the wait
    like the timeout when it returns True (a caller's own limit: a build that stopped making progress).
    Returns (timed_out or stopped, paused seconds); kills nothing."""
    start = time.monotonic()
    deadline = None if timeout_s is None else start + timeout_s
    paused = 0.0
    while True:
        if hook is not None and hook.requested():
            waited = hook.pause(sid)
            paused += waited
            if (listener := getattr(_hooks, "listener", None)) is not None:
                listener(waited)
            if deadline is not None:
                deadline += waited
        now = time.monotonic()
        left = None if deadline is None else deadline - now
        if left is not None and left <= 0:
            return True, paused
        if stop is not None and stop(now - start - paused):
            return True, paused
        if done(PAUSE_POLL_S if left is None else min(PAUSE_POLL_S, left)):
            return False, paused
