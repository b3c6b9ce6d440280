"""Node-local exclusivity of timing: a readers-writer lock on files in the node's cache directory.

Builds (and verification runs) hold the gate *shared*; a timing phase holds it *exclusive*, so on one node a
timing run never overlaps a running build or another timing run, whichever process or Ray actor runs them.

A timing phase does not wait for the node's builds to finish: it first announces itself (an exclusive lock on
a second file, ``<gate>.timing``), and every command a shared holder runs through :func:`kit.proc.run` is
**paused** at its next poll (every process of its session gets SIGSTOP), the holder lets go of the gate until
the timing phase ends, then takes it again and resumes the command (SIGCONT).  The paused seconds do not count
towards the command's timeout nor its ``wall_s``.  Python code running between commands is not paused: the
timing phase waits for it to reach its next command or leave the shared section.

``flock`` is released by the kernel when a process dies, so neither a killed timer (its builds resume) nor a
killed builder (a stopped orphaned process group gets SIGHUP + SIGCONT from the kernel; its direct child dies
with it, see :mod:`kit.proc`) leaves the node locked or paused.

Rule for callers: never block on another lock while holding the gate shared (take it before), else a paused
holder of that lock and the waiting timing phase wait for each other.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kit import proc

#: per thread: the gate paths this thread holds shared (a nested ``shared()`` takes nothing more)
_held = threading.local()


class _SharedHold:
    """The pause hook a shared holder gives :func:`kit.proc.run` (see :class:`kit.proc.Pausable`)."""

    def __init__(self, gate: NodeGate, gate_fd: int, intent_fd: int) -> None:
        self.gate, self.gate_fd, self.intent_fd = gate, gate_fd, intent_fd

    def requested(self) -> bool:
        """True while a timing phase on this node holds or waits for the gate."""
        try:
            fcntl.flock(self.intent_fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(self.intent_fd, fcntl.LOCK_UN)
        return False

    def yield_turn(self) -> float:
        """Let go of the gate until the timing phase(s) announced have ended, then hold it shared again.
        Returns the seconds waited."""
        t0 = time.monotonic()
        fcntl.flock(self.gate_fd, fcntl.LOCK_UN)
        self.gate._enter_shared(self.gate_fd, self.intent_fd)
        waited = time.monotonic() - t0
        self.gate.paused_s += waited
        self.gate.pauses += 1
        return waited


class NodeGate:
    """``with gate.shared(): build()`` / ``with gate.exclusive(): time()`` on the lock file ``path``
    (and ``path`` + ``.timing``, where a timing phase announces itself).

    ``paused_s`` / ``pauses``: seconds and number of times this process's shared holds let a timing phase
    go first (their commands paused meanwhile).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.intent_path = self.path.with_name(self.path.name + ".timing")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.paused_s = 0.0
        self.pauses = 0

    def _open(self, path: Path) -> int:
        return os.open(path, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o644)

    @staticmethod
    def _enter_shared(gate_fd: int, intent_fd: int) -> None:
        # wait until no timing phase is announced, then take the gate; a timing phase announced after the
        # check waits for this hold (and pauses its commands), never the other way round
        fcntl.flock(intent_fd, fcntl.LOCK_SH)
        try:
            fcntl.flock(gate_fd, fcntl.LOCK_SH)
        finally:
            fcntl.flock(intent_fd, fcntl.LOCK_UN)

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Hold the gate shared; commands run through :func:`kit.proc.run` meanwhile pause for timing phases.
        Re-entrant within one thread."""
        held: set[str] = _held.__dict__.setdefault("paths", set())
        key = str(self.path.resolve())
        if key in held:
            yield
            return
        gate_fd, intent_fd = self._open(self.path), self._open(self.intent_path)
        try:
            self._enter_shared(gate_fd, intent_fd)
            held.add(key)
            try:
                with proc.pausable(_SharedHold(self, gate_fd, intent_fd)):
                    yield
            finally:
                held.discard(key)
                fcntl.flock(gate_fd, fcntl.LOCK_UN)
        finally:
            os.close(gate_fd)
            os.close(intent_fd)

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the gate exclusively: announce the timing phase, wait until every shared holder has paused
        its command or left, then run alone.  Raises RuntimeError if this thread holds the gate shared (it
        would wait for itself)."""
        if str(self.path.resolve()) in _held.__dict__.get("paths", ()):
            raise RuntimeError(f"{self.path}: exclusive() inside shared() in one thread would wait for itself")
        intent_fd, gate_fd = self._open(self.intent_path), self._open(self.path)
        try:
            fcntl.flock(intent_fd, fcntl.LOCK_EX)
            try:
                fcntl.flock(gate_fd, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(gate_fd, fcntl.LOCK_UN)
            finally:
                fcntl.flock(intent_fd, fcntl.LOCK_UN)
        finally:
            os.close(gate_fd)
            os.close(intent_fd)
