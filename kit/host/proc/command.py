"""The two ways to run a command: :func:`run` (start and wait) and :func:`start`, which leaves it at a
rendezvous as a :class:`Waiting` until :meth:`Waiting.go`."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from kit.host.proc import launch
from kit.host.proc.containermode import current as current_container
from kit.host.proc.pause import _await_pausable, _current_hook
from kit.host.proc.pipes import _kill_group, _Pipes
from kit.host.proc.reaper import MARK_VAR
from kit.host.proc.result import ProcResult
from kit.host.proc.sessions import kill_session
from kit.host.proc.spawn import Spawned, _spawn
from kit.host.proc.spec import RunSpec


def run(
    argv: Sequence[str | os.PathLike[str]],
    spec: RunSpec | None = None,
    *,
    stdin_bytes: bytes | None = None,
    stop_when: Callable[[float], bool] | None = None,
    **options: Any,
) -> ProcResult:
    """Run ``argv`` and wait for it.

    Args:
        argv: program and arguments; the program is looked up on the environment's ``PATH``.
        spec: how it runs (:class:`RunSpec`: directory, environment, timeout, limits, cores, sandbox, log size);
            ``options`` are fields of it given one by one (``cwd=..., timeout_s=...``) over ``spec``.
        stdin_bytes: what the command reads on stdin (None: /dev/null).
        stop_when: the caller's own limit, asked every :data:`PAUSE_POLL_S` in this thread with the seconds
            the command has run, pauses excluded (keep it cheap): True stops it as the timeout does, the result
            ``stopped`` (a build whose steps stopped finishing, :mod:`kit.mnn.buildwatch`).

    Raises:
        FileNotFoundError: the program does not exist (nothing else is raised for a failing child).
        TypeError: an option that is no field of :class:`RunSpec`.
        what ``stop_when`` raises (the command is killed first).
    """
    spec = replace(spec or RunSpec(), **options)
    t0 = time.monotonic()
    spawned = _spawn([os.fspath(a) for a in argv], spec, stdin_bytes is not None, _launcher())
    proc, timeout_s, grace_s = spawned.proc, spec.timeout_s, spec.grace_s
    pipes = _Pipes(proc, stdin_bytes, captures=spec.captures())
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
        spawned.release()
    res = spawned.result(out, err, time.monotonic() - t0, timed_out, paused)
    return replace(res, stopped=res.stopped or stopped, cpu_s=_cpu_s(spec, pipes))


def _launcher() -> str | None:
    """The kit's launcher for a command (:mod:`kit.host.proc.launch`, compiled by :func:`run` at first use);
    None behind a container's bridge (the launcher is the host's) or where it cannot be had."""
    return launch.binary(run) if current_container() is None else None


def _cpu_s(spec: RunSpec, pipes: _Pipes) -> float | None:
    """The command's CPU seconds where ``spec`` asked for them and the kernel's accounting holds them: reaped by
    ``wait4`` (not after a kill), not behind a container bridge (whose own time it would be)."""
    return pipes.cpu_s if spec.cpu_account and current_container() is None else None


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

    def __init__(self, spawned: Spawned, pipes: _Pipes, spec: RunSpec) -> None:
        self._spawned, self._pipes = spawned, pipes
        self.args, self.proc, self.pid = spawned.args, spawned.proc, spawned.proc.pid
        self._grace_s, self._spec = spec.grace_s, spec
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
        self._spawned.release()
        res = self._spawned.result(out, err, elapsed_s, timed_out, paused_s)
        self._result = replace(res, cpu_s=_cpu_s(self._spec, self._pipes))
        return self._result


def start(
    argv: Sequence[str | os.PathLike[str]],
    spec: RunSpec | None = None,
    *,
    ready_line: str,
    **options: Any,
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
        TypeError: an option that is no field of :class:`RunSpec`.
    """
    spec = replace(spec or RunSpec(), **options)
    t0 = time.monotonic()
    spawned = _spawn([os.fspath(a) for a in argv], spec, True, _launcher())
    proc, timeout_s, grace_s = spawned.proc, spec.timeout_s, spec.grace_s
    pipes = _Pipes(proc, None, ready_line.encode(), spec.captures())
    waiting = Waiting(spawned, pipes, spec)

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


def detach(argv: Sequence[str | os.PathLike[str]], env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``argv`` as a helper that lives on its own (a reaper that outlives its caller on purpose): a session
    of its own, no parent-death signal, no session mark (the run's reaper leaves it alone), stdin, stdout and
    stderr on /dev/null, ``env`` or this process's environment.  Nothing waits for it; the caller keeps the Popen
    to kill it when it is no longer needed.

    Raises:
        FileNotFoundError: the program does not exist."""
    environment = {k: v for k, v in (env if env is not None else os.environ).items() if k != MARK_VAR}
    return subprocess.Popen([os.fspath(a) for a in argv], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True, env=environment)
