"""A reaper: when a process dies, however (SIGKILL included), kill every process it left behind that carries its
mark.

Ray's embedded instance outlives a driver that is SIGKILLed: the raylet and GCS share its fate, but the
dashboard and runtime-env agents stayed alive for minutes and ignored SIGTERM (measured with Ray 2.60 on 2 cores).
The driver puts a mark into its environment before it starts Ray (:func:`start`): every process started from
then on inherits it (Ray's daemons, the workers, their compilers and runners).  The reaper is a small process of
its own that holds the read end of a pipe whose only write end the driver holds; when the driver dies the pipe
closes, and the reaper SIGKILLs every process whose environment carries the mark (``/proc/<pid>/environ``), then
exits.  A driver that ends normally closes the pipe itself (:meth:`Reaper.close`) after shutting Ray down.

Run as ``python -m kit.proc.reaper MARK`` (it imports nothing of the kit).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

#: the environment variable that marks the processes of one driver session
MARK_VAR = "MKB_SESSION_MARK"


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


def reap(mark: str, quiet_s: float = 1.0, limit_s: float = 30.0, spare: int | None = None) -> int:
    """SIGKILL every marked process but ``spare`` until none has been seen for ``quiet_s`` (a dying daemon may
    still start one more process: three passes 50 ms apart once left two alive, in a full test run beside
    another on a loaded 2-core machine), at most ``limit_s``; returns how many were killed."""
    killed = 0
    me = {os.getpid()} | ({spare} if spare is not None else set())
    deadline = time.monotonic() + limit_s
    quiet_since = time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - quiet_since < quiet_s:
        pids = marked(mark, me)
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
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start() -> Reaper:
    """Mark this process's environment (``os.environ``, so that what it starts from now on inherits the mark)
    and start its reaper.  The reaper is not marked itself and runs in a session of its own (a kill of the
    driver's process group does not reach it)."""
    mark = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if k != MARK_VAR}
    proc = subprocess.Popen([sys.executable, "-m", "kit.proc.reaper", mark, str(os.getpid())], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True,
                            close_fds=True)
    os.environ[MARK_VAR] = mark
    return Reaper(mark, proc)


def _main(mark: str, driver: int) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a ^C to the driver's terminal is not ours to act on
    try:
        while sys.stdin.buffer.read(65536):
            pass
    except OSError:
        pass
    reap(mark, spare=driver)  # a driver that closed the pipe itself is alive and stays so
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1], int(sys.argv[2])))
