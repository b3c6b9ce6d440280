"""kit.host.proc.reaper: a SIGKILLed driver's marked processes (daemons that ignore SIGTERM, and one started late
by a dying parent) and its descendants that lost their mark are killed; a driver that closes its reaper stays
alive, its marked children do not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kit.host.proc import reaper

REPO_ROOT = Path(__file__).resolve().parents[1]

#: the driver: starts its reaper, then a daemon that ignores SIGTERM, and a parent that starts a child
#: only once it is itself being torn down (late: after the driver died); prints its mark, then waits
DRIVER = r"""
import subprocess, sys, time
from kit.host.proc import reaper
r = reaper.start()
subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 300"], start_new_session=True)
subprocess.Popen(["sh", "-c", "sleep 0.3; sleep 300 & wait"], start_new_session=True)
print(r.mark, flush=True)
if sys.argv[1] == "close":
    time.sleep(0.5)
    r.close()
    print("closed", flush=True)
time.sleep(300)
"""


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _alive(pid: int) -> bool:
    """Running or sleeping: not gone and not a zombie (an orphan's zombie waits for whoever reaps orphans here)."""
    return _state(pid) not in ("gone", "Z", "X")


def _driver(mode: str) -> tuple[subprocess.Popen[str], str]:
    p = subprocess.Popen([sys.executable, "-c", DRIVER, mode], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert p.stdout is not None
    return p, p.stdout.readline().strip()


def _gone(mark: str, limit_s: float = 30.0) -> list[int]:
    deadline = time.monotonic() + limit_s
    while (left := reaper.marked(mark)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def test_a_sigkilled_driver_leaves_no_marked_process():
    p, mark = _driver("wait")
    try:
        deadline = time.monotonic() + 10
        while len(reaper.marked(mark)) < 3 and time.monotonic() < deadline:  # sh, sh and the late sleep
            time.sleep(0.05)
        # the driver itself is not: /proc shows the environment it was started with, the mark came later
        assert len(reaper.marked(mark)) >= 3 and p.pid not in reaper.marked(mark)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(10)
        assert _gone(mark) == []
    finally:
        for pid in reaper.marked(mark):
            os.kill(pid, signal.SIGKILL)
        if p.poll() is None:
            p.kill()


#: a driver with a daemon (its own session) that starts a child ignoring SIGTERM, both with their environment wiped
#: (as a process renaming itself may wipe it): like Ray's raylet and its agents
UNMARKED = r"""
import os, subprocess, sys, time
from kit.host.proc import reaper
r = reaper.start()
subprocess.Popen(["env", "-i", "sh", "-c", "(trap '' TERM; exec sleep 300) & echo $!; exec sleep 300"],
                 stdout=open(sys.argv[1], "w"), start_new_session=True)
print(r.mark, flush=True)
time.sleep(300)
"""


def test_a_descendant_that_lost_its_mark_is_still_killed(tmp_path):
    pid_file = tmp_path / "daemon.pid"
    p = subprocess.Popen([sys.executable, "-c", UNMARKED, str(pid_file)], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    daemon = None
    try:
        assert p.stdout is not None and p.stdout.readline().strip()
        deadline = time.monotonic() + 10
        while not pid_file.read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.05)
        daemon = int(pid_file.read_text())
        assert b"MKB_SESSION_MARK" not in Path(f"/proc/{daemon}/environ").read_bytes()
        time.sleep(10 * reaper.FOLLOW_S)  # the reaper (following since start() returned) has seen it by now
        os.kill(p.pid, signal.SIGKILL)
        p.wait(10)
        deadline = time.monotonic() + 30
        while _alive(daemon) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(daemon), f"the unmarked daemon outlived the killed driver: {_state(daemon)}"
    finally:
        if daemon is not None and _alive(daemon):
            os.kill(daemon, signal.SIGKILL)
        if p.poll() is None:
            p.kill()


def test_closing_the_reaper_kills_the_marked_children_and_spares_the_driver():
    p, mark = _driver("close")
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "closed"
        assert _gone(mark) == []
        assert p.poll() is None
    finally:
        for pid in reaper.marked(mark):
            os.kill(pid, signal.SIGKILL)
        p.kill()
        p.wait()


#: a driver whose command (run through the kit's runner with an explicit, minimal environment, as every stage
#: runs its commands) leaves an orphan that its parent-death signal cannot reach (a worker SIGKILLed between
#: fork and prctl leaves the same); the reaper is then closed as a finished run closes it
ORPHAN = r"""
import sys, time
from kit.host import proc
from kit.host.proc import reaper
r = reaper.start()
res = proc.run(["sh", "-c", "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!; sleep 0.5"], env={"PATH": "/usr/bin:/bin"},
               timeout_s=30)
print(res.stdout.strip(), flush=True)
time.sleep(0.5)
r.close()
print("closed", flush=True)
time.sleep(300)
"""


def test_an_orphan_of_a_command_with_its_own_environment_is_killed_when_the_run_ends():
    p = subprocess.Popen([sys.executable, "-c", ORPHAN], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    orphan = None
    try:
        assert p.stdout is not None
        orphan = int(p.stdout.readline().strip())
        assert b"MKB_SESSION_MARK=" in Path(f"/proc/{orphan}/environ").read_bytes()
        assert p.stdout.readline().strip() == "closed"
        deadline = time.monotonic() + 30
        while _alive(orphan) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(orphan), f"the orphan outlived the finished run: {_state(orphan)}"
        assert p.poll() is None  # the driver lives on
    finally:
        if orphan is not None and _alive(orphan):
            os.kill(orphan, signal.SIGKILL)
        p.kill()
        p.wait()
