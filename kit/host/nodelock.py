"""Node-local exclusivity of timing: a readers-writer lock on files in the node's cache directory.

Builds (and verification runs) hold the gate *shared*; a timing phase holds it *exclusive*, so on one node a
timing run never overlaps a running build or another timing run, whichever process or Ray actor runs them.

A timing phase does not wait for the node's builds to finish: it first announces itself (an exclusive lock on
a second file, ``<gate>.timing``), and every command a shared holder runs through :func:`kit.host.proc.run` is
**paused** at its next poll (every process of its session gets SIGSTOP), the holder lets go of the gate until
the timing phase ends, then takes it again and resumes the command (SIGCONT).  The paused seconds do not count
towards the command's timeout nor its ``wall_s``.  Python code running between commands is not paused: the
timing phase waits for it to reach its next command or leave the shared section.

``flock`` is released by the kernel when a process dies, so a killed timer never leaves the node locked and
its paused builds resume.  A builder killed while its command is paused cannot resume it: its direct child
dies with it (``PR_SET_PDEATHSIG``, see :mod:`kit.host.proc`), but other processes of the session would stay
stopped.  So each pause is recorded as a file ``<gate>.paused/<session id>`` naming the builder (pid and
start time), and whoever next enters or leaves the gate SIGKILLs the stopped members of the sessions whose
builder is gone (:meth:`NodeLock.reap_abandoned`).

A timing stage that runs its rounds in several batches (adaptive rounds, one exclusive hold per batch) holds
the node's *turn* (:meth:`NodeLock.turn`, an exclusive lock on ``<gate>.turn``) from its first batch to its
last, so another timing stage on the node waits for all of it rather than slipping its own batches in between:
a stage that has started is never kept waiting for a later one.  Builds never take the turn.

Rules for callers: never block on another lock while holding the gate shared (take it before), else a paused
holder of that lock and the waiting timing phase wait for each other; never nest ``shared()`` and
``exclusive()`` in one thread (raises RuntimeError); take the turn before the gate, never inside it.
"""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kit.host import proc

log = logging.getLogger(__name__)

#: per thread: the gate paths this thread holds shared (a nested ``shared()`` takes nothing more) and
#: those it holds exclusive
_held = threading.local()


def _held_paths(mode: str) -> set[str]:
    return _held.__dict__.setdefault(mode, set())


class _SharedHold:
    """The pause hook a shared holder gives :func:`kit.host.proc.run` (see :class:`kit.host.proc.Pausable`)."""

    def __init__(self, gate: NodeLock, gate_fd: int, intent_fd: int) -> None:
        self.gate, self.gate_fd, self.intent_fd = gate, gate_fd, intent_fd

    def requested(self) -> bool:
        """True while a timing phase on this node holds or waits for the gate."""
        try:
            fcntl.flock(self.intent_fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(self.intent_fd, fcntl.LOCK_UN)
        return False

    def pause(self, sid: int) -> float:
        """Stop session ``sid``, let go of the gate until the announced timing phase(s) have ended, hold it
        shared again and continue the session.  Returns the seconds it was stopped; if the wait is
        interrupted, the session is killed (never left running inside a timing phase) and the error raised."""
        marker = self.gate.paused_dir / str(sid)
        self.gate.paused_dir.mkdir(exist_ok=True)
        marker.write_text(f"{os.getpid()} {proc.process_start(os.getpid())}")
        t0 = time.monotonic()
        proc.signal_session(sid, signal.SIGSTOP)
        try:
            fcntl.flock(self.gate_fd, fcntl.LOCK_UN)
            self.gate._enter_shared(self.gate_fd, self.intent_fd)
        except BaseException:
            proc.kill_session(sid)
            marker.unlink(missing_ok=True)
            raise
        proc.signal_session(sid, signal.SIGCONT, passes=1)
        marker.unlink(missing_ok=True)
        waited = time.monotonic() - t0
        self.gate.paused_s += waited
        self.gate.pauses += 1
        return waited


class NodeLock:
    """``with gate.shared(): build()`` / ``with gate.exclusive(): time()`` on the lock file ``path``
    (and ``path`` + ``.timing``, where a timing phase announces itself).

    ``paused_s`` / ``pauses``: seconds and number of times this process's shared holds let a timing phase
    go first (their commands paused meanwhile).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.intent_path = self.path.with_name(self.path.name + ".timing")
        self.turn_path = self.path.with_name(self.path.name + ".turn")
        self.paused_dir = self.path.with_name(self.path.name + ".paused")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._key = str(self.path.resolve())  # names this gate in the per-thread held sets
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

    def reap_abandoned(self) -> list[int]:
        """SIGKILL the stopped processes of every paused session whose builder died (see the module doc);
        returns their pids.  Only stopped members are killed, so a session id reused since is left alone."""
        killed: list[int] = []
        if not self.paused_dir.is_dir():
            return killed
        for marker in self.paused_dir.iterdir():
            try:
                pid, start = marker.read_text().split()
                sid = int(marker.name)
            except (OSError, ValueError):
                continue  # being written: its builder is alive
            if str(proc.process_start(int(pid))) == start:
                continue
            for member in proc.session_members(sid, state="T"):
                try:
                    os.kill(member, signal.SIGKILL)
                    killed.append(member)
                except (ProcessLookupError, PermissionError):
                    pass
            marker.unlink(missing_ok=True)
        if killed:
            log.warning("%s: killed %d stopped process(es) of builds whose worker died while paused", self.path,
                        len(killed))
        return killed

    def _check_not_held(self, mode: str) -> None:
        if self._key in _held_paths(mode):
            raise RuntimeError(f"{self.path}: already held {mode} in the same thread (taking it again here would "
                               f"wait for itself)")

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Hold the gate shared; commands run through :func:`kit.host.proc.run` meanwhile pause for timing phases.
        Re-entrant within one thread.  Raises RuntimeError inside ``exclusive()`` of the same thread."""
        key = self._key
        held = _held_paths("shared")
        if key in held:
            yield
            return
        self._check_not_held("exclusive")
        self.reap_abandoned()
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
        its command or left, then run alone.  Raises RuntimeError inside ``shared()`` or ``exclusive()`` of
        the same thread (it would wait for itself)."""
        key = self._key
        self._check_not_held("shared")
        self._check_not_held("exclusive")
        intent_fd, gate_fd = self._open(self.intent_path), self._open(self.path)
        try:
            fcntl.flock(intent_fd, fcntl.LOCK_EX)
            try:
                fcntl.flock(gate_fd, fcntl.LOCK_EX)
                _held_paths("exclusive").add(key)
                try:
                    yield
                finally:
                    _held_paths("exclusive").discard(key)
                    fcntl.flock(gate_fd, fcntl.LOCK_UN)
            finally:
                fcntl.flock(intent_fd, fcntl.LOCK_UN)
        finally:
            os.close(gate_fd)
            os.close(intent_fd)
        self.reap_abandoned()

    @contextmanager
    def turn(self) -> Iterator[None]:
        """Hold the node's turn to time (``<gate>.turn``, exclusive): the timing stages of a node run one after
        another, each through all of its exclusive holds, while builds go on between them as before.  Raises
        RuntimeError inside ``shared()`` or ``exclusive()`` of the same thread (a stage holding the turn could
        then wait for this thread's own hold)."""
        self._check_not_held("shared")
        self._check_not_held("exclusive")
        fd = self._open(self.turn_path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # the flock goes with the last descriptor
