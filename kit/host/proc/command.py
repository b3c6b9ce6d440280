"""The two ways to run a command: :func:`run` (start and wait) and :func:`start`, which leaves it at a
rendezvous as a :class:`Waiting` until :meth:`Waiting.go`."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from kit.host.proc import containermode as container
from kit.host.proc.pause import _await_pausable, _current_hook
from kit.host.proc.pipes import _kill_group, _Pipes
from kit.host.proc.result import ProcResult, _result
from kit.host.proc.sessions import kill_session
from kit.host.proc.spawn import _spawn, confinement
from kit.host.sandbox import Confinement, PidsGroup


def run(
    argv: Sequence[str | os.PathLike[str]],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
    stdin_bytes: bytes | None = None,
    log_limit: int = 256 * 1024,
    memory_limit_bytes: int | None = None,
    cpu_limit_s: int | None = None,
    cpus: Sequence[int] = (),
    confine: Confinement | None = None,
    grace_s: float = 3.0,
    stop_when: Callable[[float], bool] | None = None,
) -> ProcResult:
    """Run ``argv`` and wait for it.

    Args:
        argv: program and arguments; the program is looked up on ``env['PATH']``.
        cwd: working directory (a scratch dir for untrusted programs).
        env: the complete environment; default :func:`base_env`.
        timeout_s: wall-clock limit in seconds; on expiry the process group gets SIGTERM, then SIGKILL
            after ``grace_s`` seconds.
        memory_limit_bytes / cpu_limit_s: RLIMIT_AS / RLIMIT_CPU for the child.
        cpus: the CPU cores the child (and what it starts) may run on; empty: no pinning.
        confine: further rlimits and a sandbox (:class:`kit.host.sandbox.Confinement`); ``memory_limit_bytes`` and
            ``cpu_limit_s`` win over its limits.
        log_limit: bytes kept of each of stdout and stderr.
        stop_when: the caller's own limit, asked every :data:`PAUSE_POLL_S` in this thread with the seconds
            the command has run, pauses excluded (keep it cheap): True stops it as the timeout does, the result
            ``stopped`` (a build whose steps stopped finishing, :mod:`kit.mnn.buildwatch`).

    Raises:
        FileNotFoundError: the program does not exist (nothing else is raised for a failing child).
        what ``stop_when`` raises (the command is killed first).
    """
    args = [os.fspath(a) for a in argv]
    t0 = time.monotonic()
    proc, marker, boxed, group = _spawn(args, cwd, env, stdin_bytes is not None,
                                        confinement(confine, memory_limit_bytes, cpu_limit_s), cpus)
    pipes = _Pipes(proc, stdin_bytes)
    stop = _StopWhen(stop_when) if stop_when is not None else None
    try:
        timed_out, paused = _await_pausable(proc.pid, pipes.step, timeout_s, _current_hook(), stop)
        stopped = stop is not None and stop.said
        timed_out = timed_out and not stopped
        if timed_out or stopped:
            _kill_group(proc, grace_s)
            pipes.drain()
    except BaseException:
        _kill_group(proc, grace_s)
        raise
    else:
        # the leader exited; make sure nothing it started lingers in its session
        kill_session(proc.pid)
    finally:
        out, err = pipes.close()
        container.unlink(proc.pid)
        if marker is not None:
            marker.unlink(missing_ok=True)
        if group is not None:
            group.release()
    res = _result(args, proc, out, err, time.monotonic() - t0, timed_out, paused, log_limit, boxed)
    return replace(res, stopped=True) if stopped else res


class _StopWhen:
    """A ``stop_when`` that remembers whether it said stop: the wait then ended by the caller's limit, not the
    timeout."""

    def __init__(self, fn: Callable[[float], bool]) -> None:
        self.fn = fn
        self.said = False

    def __call__(self, running_s: float) -> bool:
        self.said = bool(self.fn(running_s))
        return self.said


#: seconds between reads of a command's output after :meth:`Waiting.go` (its exit is seen at once); a pipe of
#: BATCH_PIPE_BYTES (1 MiB, ~50 000 stamp lines) holds what a runner writes meanwhile
GO_BATCH_S = 0.02


class Waiting:
    """A command :func:`start` left at its rendezvous: it printed the ready line and blocks reading stdin.

    Call :meth:`go` once (it writes ``go\\n`` to the command's stdin and waits for it like :func:`run`), or
    :meth:`cancel`; either way the command's session is gone afterwards."""

    def __init__(self, args: list[str], proc: subprocess.Popen[bytes], marker: Path | None, pipes: _Pipes,
                 log_limit: int, grace_s: float, sandboxed: bool = False, group: PidsGroup | None = None) -> None:
        self.args, self.proc, self._marker, self._pipes = args, proc, marker, pipes
        self._sandboxed, self._group = sandboxed, group
        self._log_limit, self._grace_s = log_limit, grace_s
        self.pid = proc.pid
        self._result: ProcResult | None = None

    def go(self, timeout_s: float | None = None) -> ProcResult:
        """Let the command go on and wait for it; ``timeout_s`` counts from now (then as :func:`run`).
        ``wall_s`` of the result is the seconds from the go to its end.  Meant for a timing phase: the pause
        hook of :func:`pausable` is not polled here."""
        if self._result is not None:
            return self._result  # cancelled, or gone already
        start = time.monotonic()
        timed_out = False
        try:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(b"go\n")
                self.proc.stdin.close()
            except BrokenPipeError:
                pass  # it ended meanwhile: its exit status says how
            self._pipes.batch(GO_BATCH_S)  # the runner's stamps: no reader woken by every line (kit.mnn.stamps)
            timed_out, _ = _await_pausable(self.pid, self._pipes.step, timeout_s, None)
            if timed_out:
                _kill_group(self.proc, self._grace_s)
                self._pipes.drain()
        except BaseException:
            self.cancel()
            raise
        return self._end(time.monotonic() - start, timed_out)

    def cancel(self) -> None:
        """Kill the command's session and reap it (nothing to do once it has ended)."""
        if self._result is None:
            _kill_group(self.proc, 0.0)
            self._end(0.0, False)

    def _end(self, elapsed_s: float, timed_out: bool, paused_s: float = 0.0) -> ProcResult:
        if self._result is not None:
            return self._result
        kill_session(self.proc.pid)  # the leader exited; nothing it started lingers
        self.proc.wait()
        out, err = self._pipes.close()  # stdin included
        container.unlink(self.proc.pid)
        if self._marker is not None:
            self._marker.unlink(missing_ok=True)
        if self._group is not None:
            self._group.release()
        self._result = _result(self.args, self.proc, out, err, elapsed_s, timed_out, paused_s, self._log_limit,
                               self._sandboxed)
        return self._result


def start(
    argv: Sequence[str | os.PathLike[str]],
    *,
    ready_line: str,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
    log_limit: int = 256 * 1024,
    memory_limit_bytes: int | None = None,
    cpu_limit_s: int | None = None,
    cpus: Sequence[int] = (),
    confine: Confinement | None = None,
    grace_s: float = 3.0,
) -> Waiting | ProcResult:
    """Start ``argv`` (as :func:`run` would) and wait until it prints the line ``ready_line`` on stdout, where
    it must then block reading a line from stdin.  The start-up (exec, loading, reading inputs) is done then,
    so a later :meth:`Waiting.go` runs only what comes after the rendezvous: a timing phase holds the node for
    the measured part alone.  Output after the ready line is read by :meth:`Waiting.go` (a command that
    writes more than a pipe holds before it blocks until then).

    Inside :func:`pausable`, the hook is polled while the command starts up (it is paused like any command).
    Call :meth:`Waiting.go` from the same thread: the command gets SIGKILL when the thread that started it
    ends (the parent-death signal, as with :func:`run`).

    Returns:
        a :class:`Waiting` at the rendezvous, or the :class:`ProcResult` of a command that ended, closed its
        stdout (or was killed after ``timeout_s`` seconds, ``timed_out`` set) before printing ``ready_line``.
    Raises:
        FileNotFoundError: the program does not exist.
    """
    args = [os.fspath(a) for a in argv]
    t0 = time.monotonic()
    proc, marker, boxed, group = _spawn(args, cwd, env, True, confinement(confine, memory_limit_bytes, cpu_limit_s),
                                        cpus)
    pipes = _Pipes(proc, None, ready_line.encode())
    waiting = Waiting(args, proc, marker, pipes, log_limit, grace_s, boxed, group)

    def arrived(wait_s: float) -> bool:
        pipes.step(wait_s)
        return pipes.seen or not pipes.stdout_open or pipes.exited_at is not None

    try:
        timed_out, paused = _await_pausable(proc.pid, arrived, timeout_s, _current_hook())
        if timed_out:
            _kill_group(proc, grace_s)
    except BaseException:
        waiting.cancel()
        raise
    if pipes.seen and not timed_out:
        return waiting  # (if it ended right after the line, go() reports how)
    # it exited, closed its stdout or timed out before the ready line: session killed, status reported
    if pipes.exited_at is not None or timed_out:
        pipes.drain()
    return waiting._end(time.monotonic() - t0, timed_out, paused)
