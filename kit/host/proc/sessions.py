"""Process sessions: finding a session's members in /proc, signalling and killing them, and killing the
processes that hold the other ends of a command's pipes after leaving its session."""

from __future__ import annotations

import fcntl
import os
import signal
from collections.abc import Sequence

from kit.host.proc import containermode as container


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
    for inner in container.linked_sessions(sid):  # the command a container bridge runs
        pids += session_members(inner, state)
    return pids


def signal_session(sid: int, sig: int, passes: int = 2) -> bool:
    """Send ``sig`` to every process of session ``sid`` (its leader's group, then each member found in
    /proc, ``passes`` times: a process may fork while we scan).  Returns True if any process was signalled."""
    hit = False
    for inner in container.linked_sessions(sid):  # a container bridge's command first: it may not outlive it
        hit = signal_session(inner, sig, passes) or hit
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


def session_cpu_s(sid: int) -> float | None:
    """CPU seconds so far of the live processes of session ``sid``: every thread's time on a CPU
    (``/proc/<pid>/task/<tid>/schedstat``, nanoseconds) plus what each process's waited-for children used
    (``/proc/<pid>/stat`` cutime + cstime, clock ticks).  None where that cannot be read (no schedstat: a kernel
    without CONFIG_SCHED_INFO; a process gone while read)."""
    total_ns, ticks = 0, 0
    for pid in session_members(sid):
        fields = _stat(pid)
        try:
            tids = os.listdir(f"/proc/{pid}/task")
            for tid in tids:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total_ns += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        if fields is None:
            return None
        ticks += int(fields[13]) + int(fields[14])
    return total_ns / 1e9 + ticks / os.sysconf("SC_CLK_TCK")
