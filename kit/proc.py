"""The kit's only subprocess runner.

Every external command (cmake, ninja, g++, MNNConvert, the runner, register.py) goes through :func:`run`:
an argv list (never a shell string), an explicit environment, a new process group, a timeout that sends
SIGTERM then SIGKILL to the whole group, optional rlimits, and captured, truncated logs.  :func:`start` is the
same in two halves, for a command with a rendezvous (the timing runner: start-up first, the measured runs on
:meth:`Waiting.go`).

Every child starts a new *session*; killing a command means killing every process of that session (its
process group and any group inside it: ninja puts each compiler in a group of its own).  A command's pipes
are pumped by one selector in the calling thread (:class:`_Pipes`, no reader threads); once the leader has
exited they get :data:`PIPE_GRACE_S` seconds to reach EOF, then the kit stops reading them and kills what
holds their other ends (a grandchild that called ``setsid``; :func:`kill_pipe_holders`), so no command
holds the kit longer than its leader lives plus that grace.

A worker process that dies (a Ray actor killed, the driver SIGKILLed) cannot enforce its children's
timeouts any more.  Two safeguards: the direct child gets SIGKILL when the thread that started it dies
(Linux ``PR_SET_PDEATHSIG``: the runner and MNNConvert are direct children), and, once a worker has called
:func:`track_children`, every running child's session is recorded as a file in the worker's directory, so
the next owner of that directory (the worker that takes the same workspace) kills the sessions left behind
(ninja's compiler processes) before it builds there.

The parent-death signal and the rlimits are set by util-linux ``prlimit`` and ``setpriv --pdeathsig``
exec'ing the command in turn (same pid, same session), so Popen needs no preexec_fn and can vfork: ~3 ms per
command instead of ~17 ms to fork a worker process that has Ray, Polars and ONNX Runtime loaded (measured
on 2 cores).  Where the two tools are missing, a preexec_fn sets the same.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import math
import os
import resource
import select
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

#: environment variables passed through by default (everything else must be given explicitly)
BASE_ENV_KEYS = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "CCACHE_DIR", "CCACHE_BASEDIR", "CCACHE_NOHASHDIR")


@dataclass(frozen=True)
class ProcResult:
    """Result of one command.

    ``returncode`` is the exit status, or ``-N`` when killed by signal N (then ``signal == N``).
    ``stdout``/``stderr`` are decoded (UTF-8, replacement) and truncated to ``log_limit`` bytes each,
    keeping the head and the tail.  ``wall_s`` is wall-clock seconds the command ran, not counting
    ``paused_s``, the seconds it was stopped while a timing phase had the node (see :func:`pausable`).
    """

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    timed_out: bool = False
    signal: int | None = None
    truncated: bool = False
    paused_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    @property
    def output(self) -> str:
        return self.stdout + ("\n" if self.stdout and self.stderr else "") + self.stderr


#: where :func:`run` records the process group of each running child (None: not recorded)
_track_dir: Path | None = None
_PR_SET_PDEATHSIG = 1


class Pausable(Protocol):
    """What :func:`run` polls while a command runs inside :func:`pausable` (:class:`kit.gate.NodeGate`'s
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


def track_children(directory: Path) -> list[int]:
    """Record the process group of each child :func:`run` starts from now on in ``directory`` (an empty
    file named by the group id, removed when the group is reaped), after SIGKILLing the groups recorded
    there by a previous owner that died without reaping them.  Returns the group ids it killed.

    Call once per worker process, right after taking the lock that makes ``directory`` its own (e.g. a
    workspace lock), so that no live process still owns those groups.
    """
    global _track_dir
    directory.mkdir(parents=True, exist_ok=True)
    killed = []
    for f in directory.iterdir():
        if f.name.isdigit():
            if kill_session(int(f.name)):
                killed.append(int(f.name))
            f.unlink(missing_ok=True)
    _track_dir = directory
    return killed


def _stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot; with the pid, it names a process even after
    the pid is reused), or None if it is gone or a zombie."""
    fields = _stat(pid)
    return int(fields[19]) if fields is not None and fields[0] != "Z" else None


def session_members(sid: int, state: str | None = None) -> list[int]:
    """Pids of the live processes of session ``sid`` (from /proc; zombies left out), only those in
    ``state`` (e.g. ``"T"``, stopped) when given."""
    # getsid(2) per pid (one syscall) instead of reading every /proc/<pid>/stat (open, read, close, parse:
    # ~20x slower, and run() scans after every command); the stat file only for the rare members
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.getsid(int(name)) != sid:
                continue
        except OSError:  # gone meanwhile
            continue
        fields = _stat(name)
        if fields is None or fields[0] == "Z" or int(fields[3]) != sid:
            continue
        if state is None or fields[0] == state:
            pids.append(int(name))
    return pids


def signal_session(sid: int, sig: int, passes: int = 2) -> bool:
    """Send ``sig`` to every process of session ``sid`` (its leader's group, then each member found in
    /proc, ``passes`` times: a process may fork while we scan).  Returns True if any process was signalled."""
    hit = False
    try:
        os.killpg(sid, sig)
        hit = True
    except (ProcessLookupError, PermissionError):
        pass
    for _ in range(passes):
        members = session_members(sid)
        if not members:
            break
        for pid in members:
            try:
                os.kill(pid, sig)
                hit = True
            except (ProcessLookupError, PermissionError):
                pass
    return hit


def kill_session(sid: int) -> bool:
    """SIGKILL every process of session ``sid`` (its leader's group and every other group in it).
    Returns True if any process was signalled."""
    return signal_session(sid, signal.SIGKILL, passes=3)


#: seconds a command's pipes may stay open after its leader exited; then the kit stops reading them
PIPE_GRACE_S = 0.5


def kill_pipe_holders(ends: Sequence[int]) -> list[int]:
    """SIGKILL every other process that holds the *other* end of one of the pipes ``ends`` (file descriptors
    of this process): the writers of a pipe we read, the readers of a pipe we write.  A process that left a
    command's session (``setsid`` in a forked grandchild) with its output open would otherwise live on; a
    process holding the same end as ours (a child forked by another thread of this process) is left alone.
    Scans /proc/<pid>/fd and fdinfo (called only in that rare case; a holder hidden from that scan is not
    found, and the kit stops reading the pipes anyway).  Returns the pids killed."""
    wanted: dict[str, int] = {}  # "pipe:[inode]" -> our access mode
    for fd in ends:
        try:
            wanted[f"pipe:[{os.fstat(fd).st_ino}]"] = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
        except OSError:  # closed meanwhile
            pass
    killed = []
    me = os.getpid()
    for name in os.listdir("/proc") if wanted else ():
        if not name.isdigit() or int(name) == me:
            continue
        try:
            fds = os.listdir(f"/proc/{name}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                ours = wanted.get(os.readlink(f"/proc/{name}/fd/{fd}"))
                if ours is None:
                    continue
                with open(f"/proc/{name}/fdinfo/{fd}") as f:
                    flags = next(int(line.split()[1], 8) for line in f if line.startswith("flags:"))
                if flags & os.O_ACCMODE != ours:
                    os.kill(int(name), signal.SIGKILL)
                    killed.append(int(name))
                    break
            except (OSError, StopIteration, ValueError, IndexError):
                continue
    return killed


class _Pipes:
    """The parent's ends of a command's pipes, pumped by one selector in the calling thread (no threads): reads
    stdout and stderr as they come, writes ``stdin_bytes`` (then closes stdin), and notices the leader's exit
    through a pidfd (at once; without one, at the next step).  Once the leader has exited, the pipes get
    :data:`PIPE_GRACE_S` seconds to reach EOF; then what is left of its session and whatever holds their other
    ends is killed, and the kit stops reading them (closes its ends): nothing outlives a command's leader
    by more than that, whatever it did with the pipes.

    With ``ready_line``, the first stdout line equal to it is taken out of the output and sets :attr:`seen`."""

    def __init__(self, proc: subprocess.Popen[bytes], stdin_bytes: bytes | None, ready_line: bytes | None = None):
        self.proc = proc
        self.sel = selectors.DefaultSelector()
        self.data = {"out": bytearray(), "err": bytearray()}
        self.want = None if ready_line is None else ready_line + b"\n"
        self.seen = False
        self.exited_at: float | None = None
        self._scan = 0  # stdout offset from which to look for the ready line
        self._todo = memoryview(stdin_bytes or b"")
        assert proc.stdout is not None and proc.stderr is not None
        self.sel.register(proc.stdout.fileno(), selectors.EVENT_READ, "out")
        self.sel.register(proc.stderr.fileno(), selectors.EVENT_READ, "err")
        if stdin_bytes is not None and proc.stdin is not None:
            if stdin_bytes:
                os.set_blocking(proc.stdin.fileno(), False)
                self.sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE, "in")
            else:
                self._close_stdin()
        self.pidfd: int | None = None
        try:
            self.pidfd = os.pidfd_open(proc.pid)
            self.sel.register(self.pidfd, selectors.EVENT_READ, "exit")
        except (AttributeError, OSError):  # not Linux, an old kernel, or seccomp: proc.poll() each step
            pass

    def _close_stdin(self) -> None:
        stdin = self.proc.stdin
        if stdin is not None and not stdin.closed:
            try:
                self.sel.unregister(stdin.fileno())
            except (KeyError, ValueError):
                pass
            try:
                stdin.close()
            except OSError:  # BrokenPipeError on flush: the child closed its end
                pass

    def _ends(self) -> list[int]:
        return [key.fd for key in self.sel.get_map().values() if key.data in ("out", "err", "in")]

    @property
    def stdout_open(self) -> bool:
        """Still reading stdout (no EOF yet, not given up)."""
        return any(key.data == "out" for key in self.sel.get_map().values())

    def step(self, wait_s: float) -> bool:
        """Wait up to ``wait_s`` seconds for anything to do, do it; True once the leader has exited and the
        pipes are closed (at EOF, or given up :data:`PIPE_GRACE_S` after the exit)."""
        if self.exited_at is not None:
            wait_s = max(0.0, min(wait_s, self.exited_at + PIPE_GRACE_S - time.monotonic()))
        for key, _ in self.sel.select(wait_s) if self._ends() or self.exited_at is None else ():
            if key.data == "in":
                try:
                    n = os.write(key.fd, self._todo[:65536])
                    self._todo = self._todo[n:]
                except BlockingIOError:
                    pass
                except OSError:  # BrokenPipeError: the child closed its stdin
                    self._todo = memoryview(b"")
                if not self._todo:
                    self._close_stdin()
            elif key.data == "exit":
                self.sel.unregister(key.fd)
                self.proc.poll()
            else:
                chunk = os.read(key.fd, 65536)
                if chunk:
                    self.data[key.data] += chunk
                    if key.data == "out" and self.want is not None and not self.seen:
                        self._find_ready()
                else:
                    self.sel.unregister(key.fd)
        if self.exited_at is None and (self.pidfd is None and self.proc.poll() is not None
                                       or self.proc.returncode is not None):
            self.exited_at = time.monotonic()
        if self.exited_at is None:
            return False
        if self._ends() and time.monotonic() - self.exited_at >= PIPE_GRACE_S:
            # the leader is gone but something still holds its pipes: kill it and stop reading
            kill_session(self.proc.pid)
            kill_pipe_holders(self._ends())
            self.give_up()
        return not self._ends()

    def _find_ready(self) -> None:
        out, want = self.data["out"], self.want
        assert want is not None
        i = out.find(want, self._scan)
        while i > 0 and out[i - 1] != 0x0A:  # not at a line start: look further
            i = out.find(want, i + 1)
        if i >= 0:
            del out[i : i + len(want)]  # the rendezvous line is protocol, not output
            self.seen = True
        else:
            self._scan = max(0, len(out) - len(want))

    def drain(self) -> None:
        """Step until the pipes are closed; the leader must be dead or dying (bounded by the grace)."""
        while not self.step(PAUSE_POLL_S):
            pass

    def give_up(self) -> None:
        """Stop reading and writing: close our ends of the pipes (idempotent)."""
        self._close_stdin()
        for fd in self._ends():
            self.sel.unregister(fd)

    def close(self) -> tuple[bytes, bytes]:
        """Close everything (the pipes, the pidfd, the selector); returns (stdout, stderr) as read."""
        self.give_up()
        for f in (self.proc.stdout, self.proc.stderr):
            if f is not None:
                f.close()
        if self.pidfd is not None:
            try:
                self.sel.unregister(self.pidfd)
            except (KeyError, ValueError):
                pass
            os.close(self.pidfd)
            self.pidfd = None
        self.sel.close()
        return bytes(self.data["out"]), bytes(self.data["err"])


def _die_with_parent(parent_pid: int) -> None:
    """In the child before exec: SIGKILL me when the thread that forked me dies (Linux only)."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(137)


_PRLIMIT, _SETPRIV = shutil.which("prlimit"), shutil.which("setpriv")


def _wrapper(memory_limit_bytes: int | None, cpu_limit_s: int | None) -> list[str] | None:
    """``prlimit`` (core dumps off, RLIMIT_AS, RLIMIT_CPU) then ``setpriv --pdeathsig KILL`` (util-linux), each
    exec'ing the next, so the command runs as the same direct child with the same limits and parent-death
    signal a preexec_fn would set; None where they are missing (then :func:`run` uses a preexec_fn)."""
    if not sys.platform.startswith("linux") or _PRLIMIT is None or _SETPRIV is None:
        return None
    limits = ["--core=0"]
    if memory_limit_bytes is not None:
        limits.append(f"--as={memory_limit_bytes}")
    if cpu_limit_s is not None:
        limits.append(f"--cpu={cpu_limit_s}:{cpu_limit_s + 5}")
    return [_PRLIMIT, *limits, "--", _SETPRIV, "--pdeathsig", "KILL", "--"]


def _check_program(program: str, env: Mapping[str, str], cwd: str | os.PathLike[str] | None) -> None:
    """Raise FileNotFoundError as Popen would when ``program`` cannot be executed (the wrapper would only
    exit 127)."""
    if os.sep in program:
        path = program if os.path.isabs(program) or cwd is None else os.path.join(os.fspath(cwd), program)
        found = os.path.isfile(path) and os.access(path, os.X_OK)
    else:
        found = shutil.which(program, path=env.get("PATH", os.defpath)) is not None
    if not found:
        raise FileNotFoundError(errno.ENOENT, f"No such file or directory: {program!r}", program)


def base_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A minimal environment: :data:`BASE_ENV_KEYS` from ours, then ``extra`` on top."""
    env = {k: os.environ[k] for k in BASE_ENV_KEYS if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.setdefault("LANG", "C.UTF-8")
    if extra:
        env.update(extra)
    return env


def _truncate(data: bytes, limit: int) -> tuple[str, bool]:
    if len(data) <= limit:
        return data.decode("utf-8", "replace"), False
    head = data[: limit // 4]
    tail = data[-(limit - limit // 4) :]
    cut = len(data) - len(head) - len(tail)
    return (
        head.decode("utf-8", "replace") + f"\n[... {cut} bytes cut ...]\n" + tail.decode("utf-8", "replace"),
        True,
    )


def _kill_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break  # the leader's group is empty; other groups of its session may not be
        _wait_exit(proc, grace_s)  # once the leader is gone, members of its group may remain: SIGKILL them too
    kill_session(proc.pid)


def _wait_exit(proc: subprocess.Popen[bytes], timeout_s: float | None) -> bool:
    """Wait up to ``timeout_s`` seconds (None: for ever) for ``proc`` to exit, and reap it.  Returns True when
    it has exited.

    ``Popen.wait(timeout)`` polls with sleeps that double up to 50 ms (a 25 ms command is seen to end at
    ~31 ms); a pidfd (Linux >= 5.3) wakes at the exit itself.  Elsewhere ``Popen.wait`` does the waiting.
    (A running command's own exit is watched by :class:`_Pipes`; this is for the kills.)"""
    if proc.returncode is not None:
        return True
    if timeout_s is None:
        proc.wait()
        return True
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux, an old kernel, or seccomp: the polling wait
        try:
            proc.wait(timeout=timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False
    deadline = time.monotonic() + timeout_s
    exited = False
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while not exited:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            # poll takes int milliseconds: rounded up (never early), at most a day per call (inf, 1e9 s)
            exited = bool(poller.poll(math.ceil(min(left, 86400.0) * 1000)))
    finally:
        os.close(fd)
    if exited:
        proc.wait()  # a zombie now: reaped at once
    return exited or proc.poll() is not None


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
    grace_s: float = 3.0,
) -> ProcResult:
    """Run ``argv`` and wait for it.

    Args:
        argv: program and arguments; the program is looked up on ``env['PATH']``.
        cwd: working directory (a scratch dir for untrusted programs).
        env: the complete environment; default :func:`base_env`.
        timeout_s: wall-clock limit in seconds; on expiry the process group gets SIGTERM, then SIGKILL
            after ``grace_s`` seconds.
        memory_limit_bytes / cpu_limit_s: RLIMIT_AS / RLIMIT_CPU for the child.
        log_limit: bytes kept of each of stdout and stderr.

    Raises:
        FileNotFoundError: the program does not exist (nothing else is raised for a failing child).
    """
    args = [os.fspath(a) for a in argv]
    t0 = time.monotonic()
    proc, marker = _spawn(args, cwd, env, stdin_bytes is not None, memory_limit_bytes, cpu_limit_s)
    pipes = _Pipes(proc, stdin_bytes)
    try:
        timed_out, paused = _await_pausable(proc.pid, pipes.step, timeout_s, getattr(_hooks, "hook", None))
        if timed_out:
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
        if marker is not None:
            marker.unlink(missing_ok=True)
    return _result(args, proc, out, err, time.monotonic() - t0, timed_out, paused, log_limit)


def _spawn(
    args: list[str], cwd: str | os.PathLike[str] | None, env: Mapping[str, str] | None, stdin_pipe: bool,
    memory_limit_bytes: int | None, cpu_limit_s: int | None,
) -> tuple[subprocess.Popen[bytes], Path | None]:
    """Start ``args`` in a session of its own with the limits and the parent-death signal (see :func:`run`),
    stdout/stderr piped, stdin piped or /dev/null; record its session under :func:`track_children`'s directory.
    Returns the Popen and the record's path (None when not tracking)."""
    environment = dict(env) if env is not None else base_env()
    popen_args: dict = {}
    wrapper = _wrapper(memory_limit_bytes, cpu_limit_s)
    if wrapper is not None:
        # limits and the parent-death signal set by exec'd helpers: without a preexec_fn, Popen can vfork
        # (measured: ~1-3 ms per command instead of ~17 ms for a fork of a worker process with ray, polars
        # and onnxruntime loaded)
        _check_program(args[0], environment, cwd)
        command = wrapper + args
    else:
        parent_pid = os.getpid()

        def _preexec() -> None:
            _die_with_parent(parent_pid)
            if memory_limit_bytes is not None:
                resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))
            if cpu_limit_s is not None:
                resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit_s, cpu_limit_s + 5))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        command = args
        popen_args["preexec_fn"] = _preexec
    proc = subprocess.Popen(
        command,
        cwd=os.fspath(cwd) if cwd is not None else None,
        env=environment,
        stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        **popen_args,
    )
    marker = _track_dir / str(proc.pid) if _track_dir is not None else None
    if marker is not None:
        marker.touch()
    return proc, marker


def _result(
    args: list[str], proc: subprocess.Popen[bytes], out: bytes | None, err: bytes | None, elapsed_s: float,
    timed_out: bool, paused_s: float, log_limit: int,
) -> ProcResult:
    rc = proc.returncode
    so, t1 = _truncate(out or b"", log_limit)
    se, t2 = _truncate(err or b"", log_limit)
    return ProcResult(
        argv=tuple(args),
        returncode=rc if rc is not None else -9,
        stdout=so,
        stderr=se,
        wall_s=elapsed_s - paused_s,
        timed_out=timed_out,
        signal=-rc if rc is not None and rc < 0 else None,
        truncated=t1 or t2,
        paused_s=paused_s,
    )


def _await_pausable(
    sid: int, done: Callable[[float], bool], timeout_s: float | None, hook: Pausable | None
) -> tuple[bool, float]:
    """Wait until ``done(wait_s)`` (which itself waits up to ``wait_s`` seconds) returns True or ``timeout_s``
    seconds of running (not paused) time have passed.  ``hook`` is polled first and then every
    :data:`PAUSE_POLL_S`: a command started while a timing phase waits is paused at once, not a poll later.
    Returns (timed_out, paused seconds); kills nothing."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    paused = 0.0
    while True:
        if hook is not None and hook.requested():
            waited = hook.pause(sid)
            paused += waited
            if deadline is not None:
                deadline += waited
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return True, paused
        if done(PAUSE_POLL_S if left is None else min(PAUSE_POLL_S, left)):
            return False, paused


class Waiting:
    """A command :func:`start` left at its rendezvous: it printed the ready line and blocks reading stdin.

    Call :meth:`go` once (it writes ``go\\n`` to the command's stdin and waits for it like :func:`run`), or
    :meth:`cancel`; either way the command's session is gone afterwards."""

    def __init__(self, args: list[str], proc: subprocess.Popen[bytes], marker: Path | None, pipes: _Pipes,
                 log_limit: int, grace_s: float) -> None:
        self.args, self.proc, self._marker, self._pipes = args, proc, marker, pipes
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
        if self._marker is not None:
            self._marker.unlink(missing_ok=True)
        self._result = _result(self.args, self.proc, out, err, elapsed_s, timed_out, paused_s, self._log_limit)
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
    proc, marker = _spawn(args, cwd, env, True, memory_limit_bytes, cpu_limit_s)
    pipes = _Pipes(proc, None, ready_line.encode())
    waiting = Waiting(args, proc, marker, pipes, log_limit, grace_s)

    def arrived(wait_s: float) -> bool:
        pipes.step(wait_s)
        return pipes.seen or not pipes.stdout_open or pipes.exited_at is not None

    try:
        timed_out, paused = _await_pausable(proc.pid, arrived, timeout_s, getattr(_hooks, "hook", None))
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


def which(program: str, env: Mapping[str, str] | None = None) -> Path | None:
    """Locate ``program`` on ``env['PATH']`` (or ours)."""
    path = (env or os.environ).get("PATH")
    found = shutil.which(program, path=path)
    return Path(found) if found else None
