"""A reaper: when a process dies, however (SIGKILL included), kill every process it left behind.

Ray's embedded instance outlives a driver that is SIGKILLed: the raylet and GCS share its fate, but the
dashboard and runtime-env agents stayed alive for minutes and ignored SIGTERM (measured with Ray 2.60 on 2 cores).
The reaper is a small process of its own that holds the read end of a pipe whose only write end the driver holds;
when the driver dies the pipe closes, and the reaper SIGKILLs what the driver left, then exits.  A driver that
ends normally says so and closes the pipe itself (:meth:`Reaper.close`) after shutting Ray down.

What the driver left is known two ways.  The driver puts a mark into its environment before it starts Ray
(:func:`start`): every process started from then on inherits it (``/proc/<pid>/environ``).  But a process that
renames itself (Ray's agents and workers: ``ray::DashboardAgent``) may overwrite that memory: on a loaded
2-core machine the two agents outlived a killed driver unmarked (parent 1) in 5 of 24 runs.  So while the driver
lives the reaper also follows its descendants (parent links, every :data:`FOLLOW_S`, each known with its start
time so a reused pid is never taken for one), and kills those too when the driver has died.

Run as ``python -m kit.host.proc.reaper MARK DRIVER_PID`` (it imports nothing of the kit).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
import uuid

#: the environment variable that marks the processes of one driver session
MARK_VAR = "MKB_SESSION_MARK"
#: seconds between two looks at the driver's descendants (a scan of /proc: a few ms)
FOLLOW_S = 0.5
#: what a driver that lives on writes before it closes the pipe (a pipe closed without it: the driver died)
BYE = b"bye\n"


def marked(mark: str, exclude: set[int] | None = None) -> list[int]:
    """Pids of the live processes whose environment has ``MKB_SESSION_MARK=<mark>`` (but ``exclude``)."""
    needle = f"{MARK_VAR}={mark}".encode()
    out = []
    for d in os.scandir("/proc"):
        if not d.name.isdigit() or (exclude and int(d.name) in exclude):
            continue
        try:
            with open(f"/proc/{d.name}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    out.append(int(d.name))
        except OSError:
            continue
    return out


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) of ``pid``, None if it is gone or a zombie (dead, not yet waited
    for: a SIGKILLed driver stays one until its parent reaps it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return None if fields[0] in (b"Z", b"X") else (int(fields[1]), int(fields[19]))
    except (OSError, IndexError, ValueError):
        return None


class Family:
    """The descendants of ``root`` seen so far (pid → start time), followed by :meth:`update`: a process is one
    when its parent is ``root`` or one already known (the same start time), and stays one after it is orphaned."""

    def __init__(self, root: int, exclude: set[int]) -> None:
        self.root, self.exclude, self.known = root, exclude, {}

    def update(self) -> None:
        table = {}
        for d in os.scandir("/proc"):
            if d.name.isdigit() and int(d.name) not in self.exclude and (st := _stat(int(d.name))) is not None:
                table[int(d.name)] = st
        self.known = {p: t for p, t in self.known.items() if p in table and table[p][1] == t}
        grown = True
        while grown:
            grown = False
            for pid, (ppid, start) in table.items():
                if pid not in self.known and (ppid == self.root or ppid in self.known):
                    self.known[pid] = start
                    grown = True

    def alive(self) -> list[int]:
        self.update()
        return list(self.known)


def reap(mark: str, quiet_s: float = 1.0, limit_s: float = 30.0, spare: int | None = None,
         family: Family | None = None) -> int:
    """SIGKILL every marked process but ``spare``, and every one of ``family``, until none has been seen for
    ``quiet_s`` (a dying daemon may still start one more process), at most ``limit_s``; returns how many were
    killed."""
    killed = 0
    me = {os.getpid()} | ({spare} if spare is not None else set())
    deadline = time.monotonic() + limit_s
    quiet_since = time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - quiet_since < quiet_s:
        pids = set(marked(mark, me)) | (set(family.alive()) - me if family is not None else set())
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
        if pids:
            quiet_since = time.monotonic()
        time.sleep(0.05)
    return killed


class Reaper:
    """The reaper of this process's session: :func:`start` makes one; :meth:`close` ends it (and kills what is
    left marked)."""

    def __init__(self, mark: str, proc: subprocess.Popen[bytes]) -> None:
        self.mark, self.proc = mark, proc

    def close(self, timeout_s: float = 10.0) -> None:
        """End the reaper (it kills what is left marked, never this process) and unmark this process."""
        if os.environ.get(MARK_VAR) == self.mark:
            del os.environ[MARK_VAR]
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.write(BYE)
                self.proc.stdin.flush()
            except OSError:
                pass  # a reaper already gone
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start() -> Reaper:
    """Mark this process's environment (``os.environ``, so that what it starts from now on inherits the mark)
    and start its reaper.  The reaper is not marked itself and runs in a session of its own (a kill of the
    driver's process group does not reach it).  Returns once the reaper follows this process's descendants
    (it says so on its stdout: a Python start, ~0.1 s; more on a loaded machine)."""
    mark = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if k != MARK_VAR}
    proc = subprocess.Popen([sys.executable, "-m", "kit.host.proc.reaper", mark, str(os.getpid())], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, start_new_session=True,
                            close_fds=True)
    assert proc.stdout is not None
    proc.stdout.readline()  # "following" (or nothing: a reaper that failed to start; the pipe closed)
    proc.stdout.close()
    os.environ[MARK_VAR] = mark
    return Reaper(mark, proc)


def _main(mark: str, driver: int) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a ^C to the driver's terminal is not ours to act on
    family = Family(driver, {os.getpid()})
    stdin = sys.stdin.buffer.raw
    family.update()
    try:
        sys.stdout.write("following\n")
        sys.stdout.close()
    except OSError:
        pass
    said = b""
    try:
        while True:
            family.update()
            if select.select([stdin], [], [], FOLLOW_S)[0]:
                chunk = stdin.read(65536)
                if not chunk:
                    break  # the pipe closed: the driver closed it, or died
                said += chunk
    except OSError:
        pass
    # Not the driver's /proc state: a SIGKILLed process closes its files before it turns zombie, and in that
    # window it still reads as running (seen in 2 of 6 loaded runs of the unmarked-descendant test).
    if BYE in said:
        reap(mark, spare=driver)  # closed by a driver that lives on: only what carries the mark
    else:
        reap(mark, family=family)  # the driver died: the marked processes and every descendant it had
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1], int(sys.argv[2])))
