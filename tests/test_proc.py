"""The subprocess runner: timeouts kill the whole group, signals and exit codes are reported."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kit.host import proc
from kit.host.proc import launch, spawn


def test_exit_code_and_output():
    r = proc.run([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"])
    assert r.returncode == 3 and not r.ok and r.signal is None
    assert r.stdout.strip() == "out" and r.stderr.strip() == "err"


def test_signal_is_reported():
    r = proc.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"])
    assert r.signal == 11 and r.returncode == -11


def test_timeout_kills_the_process_group(tmp_path):
    marker = tmp_path / "child.pid"
    code = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(marker)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(60)\n"
    )
    r = proc.run([sys.executable, "-c", code], timeout_s=1.5, grace_s=0.5)
    assert r.timed_out and not r.ok
    child = int(marker.read_text())
    # the grandchild was in the same group and is gone (or a zombie reaped by init)
    with pytest.raises(ProcessLookupError):
        for _ in range(50):
            os.kill(child, 0)
            import time

            time.sleep(0.05)
            st = Path(f"/proc/{child}/stat").read_text().split()[2]
            if st == "Z":
                raise ProcessLookupError


def test_stop_when_stops_the_command_with_running_seconds_that_exclude_pauses():
    """The caller's own limit (a stalled build, kit.mnn.buildwatch): asked with the seconds of running time,
    True kills the command as a timeout would and the result says ``stopped``, not ``timed_out``."""
    asked: list[float] = []

    def after_half_a_second(running_s: float) -> bool:
        asked.append(running_s)
        return running_s >= 0.5

    t0 = time.monotonic()
    r = proc.run(["sleep", "30"], stop_when=after_half_a_second, grace_s=0.5)
    assert r.stopped and not r.timed_out and not r.ok and r.signal == 15
    assert 0.5 <= time.monotonic() - t0 < 5
    assert asked == sorted(asked) and len(asked) > 5  # asked every poll, not once
    done = proc.run(["true"], stop_when=lambda running_s: False)
    assert done.ok and not done.stopped

    class PauseOnce:  # a timing phase that holds the node for 1 s while the command runs
        def __init__(self) -> None:
            self.asked = False

        def requested(self) -> bool:
            first, self.asked = not self.asked, True
            return first

        def pause(self, sid: int) -> float:
            time.sleep(1.0)
            return 1.0

    t0 = time.monotonic()
    with proc.pausable(PauseOnce()):
        r = proc.run(["sleep", "30"], stop_when=lambda running_s: running_s >= 0.5, grace_s=0.5)
    assert r.stopped and time.monotonic() - t0 >= 1.5 and r.paused_s == 1.0  # the paused second not counted


def test_output_is_truncated_head_and_tail():
    r = proc.run([sys.executable, "-c", "print('A' * 5000 + 'B' * 5000 + 'END')"], log_limit=1000)
    assert r.truncated and "bytes left out" in r.stdout
    assert r.stdout.startswith("A") and r.stdout.rstrip().endswith("END")


def test_environment_is_explicit(monkeypatch):
    monkeypatch.setenv("MKB_SECRET_FOR_TEST", "1")
    r = proc.run([sys.executable, "-c", "import os; print(os.environ.get('MKB_SECRET_FOR_TEST'))"])
    assert r.stdout.strip() == "None"
    r = proc.run([sys.executable, "-c", "import os; print(os.environ['X'])"], env=proc.base_env({"X": "y"}))
    assert r.stdout.strip() == "y"


def test_memory_limit():
    r = proc.run([sys.executable, "-c", "b = bytearray(2_000_000_000)"], memory_limit_bytes=500_000_000)
    assert not r.ok and "MemoryError" in r.stderr


def test_missing_program():
    with pytest.raises(FileNotFoundError):
        proc.run(["/nonexistent/program"])


def _alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_until(cond, what: str, limit_s: float = 30.0) -> None:
    import time

    end = time.monotonic() + limit_s
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"not within {limit_s} s: {what}")
        time.sleep(0.05)


@pytest.fixture
def restore_tracking():
    saved = spawn._track_dir
    yield
    spawn._track_dir = saved


def test_running_children_are_recorded_and_unrecorded(tmp_path, restore_tracking):
    track = tmp_path / "procs"
    assert proc.track_children(track) == []
    res = proc.run(["sh", "-c", f"echo $$; ls {track}"])
    pid, listed = res.stdout.split("\n", 1)
    assert listed.split() == [pid]  # the child's own group was on record while it ran
    assert list(track.iterdir()) == []  # and is gone once reaped


def test_a_removed_tracking_directory_stops_the_tracking(tmp_path, restore_tracking):
    """A worker's temporary cache removed while its process lives on (a benchmark run in-process): the next
    command still runs and is waited for (it raised FileNotFoundError after its child had started)."""
    track = tmp_path / "cache" / "procs"
    assert proc.track_children(track) == []
    shutil.rmtree(tmp_path / "cache")
    res = proc.run(["sh", "-c", "echo ran"])
    assert res.ok and res.stdout.strip() == "ran"
    started = proc.start(["sh", "-c", "echo ready; read go; echo went"], ready_line="ready", timeout_s=30)
    assert not isinstance(started, proc.ProcResult)
    done = started.go(timeout_s=30)
    assert done.ok and "went" in done.stdout
    assert not (tmp_path / "cache").exists()  # nothing made again where the owner's directory was


def test_track_children_kills_groups_a_dead_owner_left(tmp_path, restore_tracking):
    import subprocess

    track = tmp_path / "procs"
    track.mkdir()
    # a group whose owner "died": a shell (group leader) with a grandchild, recorded but never reaped by us
    leftover = subprocess.Popen(["sh", "-c", "sleep 300 & wait"], start_new_session=True)
    (track / str(leftover.pid)).write_text(spawn._identity(leftover.pid, track))  # as run() records it
    (track / "not-a-pid").touch()
    assert proc.track_children(track) == [leftover.pid]
    assert leftover.wait(timeout=30) == -9
    assert [f.name for f in track.iterdir()] == ["not-a-pid"]


def test_track_children_kills_only_the_process_it_recorded(tmp_path, restore_tracking):
    """A group number alone is not enough: a copy of a cache taken while a run went on named that run's live
    compilers (the copy's worker killed them); a number from an older kit or another boot names whatever
    process has it now.  Only the recorded leader, recorded in this directory, is killed."""
    import shutil
    import subprocess

    live = subprocess.Popen(["sh", "-c", "sleep 300 & wait"], start_new_session=True)
    try:
        run_track = tmp_path / "run" / "procs"
        run_track.mkdir(parents=True)
        (run_track / str(live.pid)).write_text(spawn._identity(live.pid, run_track))
        copy = tmp_path / "copy" / "procs"
        shutil.copytree(run_track, copy)  # the copied cache's first worker
        assert proc.track_children(copy) == []
        other = tmp_path / "other" / "procs"
        other.mkdir(parents=True)
        (other / str(live.pid)).touch()  # recorded without an identity (an older kit)
        ident = spawn._identity(live.pid, other)
        stale = tmp_path / "stale" / "procs"
        stale.mkdir(parents=True)
        (stale / str(live.pid)).write_text(ident.replace(ident.split()[1], "1", 1))  # another start time
        assert proc.track_children(other) == [] and proc.track_children(stale) == []
        assert live.poll() is None  # alive through all three
    finally:
        live.kill()
        live.wait(timeout=30)


def test_child_dies_with_its_killed_parent(tmp_path):
    """A worker killed by SIGKILL takes its runner/converter child with it (PR_SET_PDEATHSIG)."""
    import signal
    import subprocess

    pid_file = tmp_path / "child.pid"
    code = ("import sys; from kit.host import proc; "
            f"proc.run(['sh', '-c', 'echo $$ > {pid_file}; exec sleep 300'])")
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=Path(__file__).resolve().parent.parent)
    _wait_until(lambda: pid_file.is_file() and pid_file.read_text().strip(), "the child wrote its pid")
    child = int(pid_file.read_text())
    assert _alive(child)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    _wait_until(lambda: not _alive(child), "the child died with its parent")


def test_timeout_kills_other_process_groups_of_the_session(tmp_path):
    """ninja puts every compiler in a process group of its own: a timeout must kill those too."""
    pid_file = tmp_path / "gc.pid"
    inner = f"{sys.executable} -c 'import os, time; os.setpgid(0, 0); time.sleep(300)'"
    res = proc.run(["sh", "-c", f"{inner} & echo $! > {pid_file}; wait"], timeout_s=2, grace_s=0.5)
    assert res.timed_out
    gc = int(pid_file.read_text())
    _wait_until(lambda: not _alive(gc), "the grandchild in its own group was killed")


def test_leftovers_of_a_command_that_exited_are_killed(tmp_path):
    """A command that exits normally but leaves a background process (in a group of its own, so not hit by
    killpg of the leader's group) leaves nothing running: run() kills every member of its session."""
    pid_file = tmp_path / "bg.pid"
    inner = f"{sys.executable} -c 'import os, time; os.setpgid(0, 0); time.sleep(300)'"
    res = proc.run(["sh", "-c", f"{inner} > /dev/null 2>&1 & echo $! > {pid_file}; sleep 0.3"], timeout_s=20)
    assert res.ok and not res.timed_out
    bg = int(pid_file.read_text())
    _wait_until(lambda: not _alive(bg), "the background process of the finished command was killed")


def test_session_members_lists_live_members_only(tmp_path):
    """session_members finds the processes of a session (any group) and leaves out other sessions."""
    import subprocess

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        _wait_until(lambda: proc.session_members(child.pid) == [child.pid], "the new session's leader is listed")
        assert child.pid not in proc.session_members(os.getsid(0))
        assert proc.session_members(child.pid, state="T") == []
    finally:
        child.kill()
        child.wait()
    assert proc.session_members(child.pid) == []


def test_without_the_util_linux_helpers_a_preexec_fn_sets_the_same(monkeypatch, tmp_path):
    """The last fallback (no launcher, no util-linux): limits, a missing program and the session behave as with
    prlimit/setpriv."""
    monkeypatch.setattr(launch, "binary", lambda run: None)
    monkeypatch.setattr(spawn, "_PRLIMIT", None)
    assert spawn._wrapper(None, None) is None
    res = proc.run([sys.executable, "-c", "bytearray(512 * 1024 * 1024)"], memory_limit_bytes=256 * 1024 * 1024)
    assert not res.ok and "MemoryError" in res.stderr
    with pytest.raises(FileNotFoundError):
        proc.run(["/nonexistent/program"])
    res = proc.run(["sh", "-c", "ulimit -c; cat /proc/self/stat"])
    fields = res.stdout.split("\n", 1)[1].rsplit(")", 1)[1].split()
    assert res.stdout.split()[0] == "0" and int(fields[3]) == int(fields[2])  # no core dumps; own session


def test_a_relative_program_is_found_from_cwd_or_reported_missing(tmp_path):
    script = tmp_path / "hello.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    assert proc.run(["./hello.sh"], cwd=tmp_path).stdout == "hi\n"
    with pytest.raises(FileNotFoundError):
        proc.run(["./missing.sh"], cwd=tmp_path)
    with pytest.raises(FileNotFoundError):
        proc.run(["no-such-program-anywhere"])


# a command with a rendezvous: prints a line, READY, then waits for a line on stdin
_RENDEZVOUS = "echo loading; echo to-stderr >&2; echo READY; read x; echo got-$x; exit 0"


def test_start_stops_at_the_rendezvous_and_go_runs_the_rest():
    w = proc.start(["sh", "-c", _RENDEZVOUS], ready_line="READY", timeout_s=20)
    assert isinstance(w, proc.Waiting)
    assert _alive(w.pid)
    res = w.go(timeout_s=20)
    assert res.ok and not res.timed_out
    assert res.stdout.split() == ["loading", "got-go"]  # the ready line is protocol, not output
    assert res.stderr.strip() == "to-stderr"
    assert not _alive(w.pid)


def test_after_go_output_read_in_batches_comes_whole():
    """After go the pipes are read at most every GO_BATCH_S (a timing run's stamp lines wake no reader each): a
    command writing 2 MB in 150 000 lines (more than a pipe holds) loses none, in order; a line written just
    before a short pause and the exit is there too."""
    script = ("echo READY; read x; python3 -c \"import sys\nfor i in range(150000): sys.stderr.write("
              "'@mkbt b %x\\n' % i)\"")
    w = proc.start(["sh", "-c", script], ready_line="READY", timeout_s=60, log_limit=16 << 20)
    assert isinstance(w, proc.Waiting)
    res = w.go(timeout_s=60)
    assert res.ok and not res.truncated, res.stderr[-300:]
    assert res.stderr.splitlines() == [f"@mkbt b {i:x}" for i in range(150000)]
    w = proc.start(["sh", "-c", "echo READY; read x; echo early >&2; sleep 0.05; exit 0"], ready_line="READY",
                   timeout_s=20)
    res = w.go(timeout_s=20)
    assert res.ok and res.stderr.strip() == "early"


def test_start_returns_the_result_of_a_command_that_ends_before_its_rendezvous():
    res = proc.start(["sh", "-c", "echo broken >&2; exit 3"], ready_line="READY", timeout_s=20)
    assert isinstance(res, proc.ProcResult)
    assert res.returncode == 3 and res.stderr.strip() == "broken" and not res.timed_out


def test_start_times_out_before_the_rendezvous(tmp_path):
    pid_file = tmp_path / "pid"
    res = proc.start(["sh", "-c", f"echo $$ > {pid_file}; exec sleep 300"], ready_line="READY", timeout_s=0.5,
                     grace_s=0.2)
    assert isinstance(res, proc.ProcResult) and res.timed_out
    assert not _alive(int(pid_file.read_text()))


def test_cancel_kills_a_waiting_command_and_go_times_out():
    w = proc.start(["sh", "-c", _RENDEZVOUS], ready_line="READY", timeout_s=20)
    assert isinstance(w, proc.Waiting)
    w.cancel()
    assert not _alive(w.pid)
    w.cancel()  # idempotent
    w2 = proc.start(["sh", "-c", "echo READY; read x; exec sleep 300"], ready_line="READY", timeout_s=20)
    assert isinstance(w2, proc.Waiting)
    res = w2.go(timeout_s=0.5)
    assert res.timed_out and not res.ok
    assert not _alive(w2.pid)


def test_start_tolerates_output_after_the_ready_line_and_a_closed_stderr():
    w = proc.start(["sh", "-c", "exec 2>&-; echo READY; echo more; read x; echo got-$x"], ready_line="READY",
                   timeout_s=20)
    assert isinstance(w, proc.Waiting), w
    res = w.go(timeout_s=20)
    assert res.ok and res.stdout.split() == ["more", "got-go"]
    assert w.go() is res  # a second go() gives the same result


def test_start_reports_an_exit_before_the_ready_line_at_once(tmp_path):
    """The leader exits while a background child keeps its stdout open: its exit status, not a timeout; the
    child is killed with the session."""
    pid_file = tmp_path / "bg.pid"
    t0 = __import__("time").monotonic()
    res = proc.start(["sh", "-c", f"sleep 60 & echo $! > {pid_file}; exit 3"], ready_line="READY", timeout_s=20)
    assert isinstance(res, proc.ProcResult)
    assert res.returncode == 3 and not res.timed_out
    assert __import__("time").monotonic() - t0 < 10
    _wait_until(lambda: not _alive(int(pid_file.read_text())), "the background child was killed")


@pytest.fixture(params=["pidfd", "polling"])
def exit_wait(request, monkeypatch):
    """Both ways :func:`proc._wait_exit` waits: a pidfd (woken at the exit) and ``Popen.wait``'s polling loop
    (where ``os.pidfd_open`` is missing or refused); records the timeouts ``Popen.wait`` was called with."""
    if request.param == "polling":
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    elif not hasattr(os, "pidfd_open"):
        pytest.skip("no os.pidfd_open here")
    calls: list[float | None] = []
    real_wait = subprocess.Popen.wait

    def wait(self, timeout=None):
        calls.append(timeout)
        return real_wait(self, timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", wait)
    return request.param, calls


def test_wait_exit_reaps_an_exited_command_and_leaves_a_running_one(exit_wait):
    how, calls = exit_wait
    quick = subprocess.Popen(["sh", "-c", "exit 7"])
    assert proc._wait_exit(quick, 20) is True
    assert quick.returncode == 7  # reaped
    slow = subprocess.Popen(["sleep", "300"])
    try:
        assert proc._wait_exit(slow, 0.2) is False
        assert slow.returncode is None and _alive(slow.pid)
    finally:
        slow.kill()
        assert proc._wait_exit(slow, None) is True and slow.returncode == -9
    if how == "pidfd":  # the polling wait (sleeps doubling up to 50 ms) is never used with a timeout
        assert all(t is None for t in calls), calls
    else:
        assert any(t is not None for t in calls), calls


def test_go_waits_for_the_exit_either_way(exit_wait):
    how, calls = exit_wait
    w = proc.start(["sh", "-c", _RENDEZVOUS], ready_line="READY", timeout_s=20)
    assert isinstance(w, proc.Waiting)
    res = w.go(timeout_s=20)
    assert res.ok and res.stdout.split() == ["loading", "got-go"]
    w2 = proc.start(["sh", "-c", "echo READY; read x; exec sleep 300"], ready_line="READY", timeout_s=20)
    assert isinstance(w2, proc.Waiting)
    res2 = w2.go(timeout_s=0.3)
    assert res2.timed_out and not _alive(w2.pid)
    assert (how == "pidfd") == all(t is None for t in calls), calls


def test_wait_exit_and_go_take_an_unbounded_timeout(exit_wait):
    """inf and 1e9 s mean "no limit" (``timing.timeout_s`` accepts both): poll(2) takes at most INT_MAX ms."""
    quick = subprocess.Popen(["true"])
    assert proc._wait_exit(quick, float("inf")) is True and quick.returncode == 0
    for limit in (float("inf"), 1e9):
        w = proc.start(["sh", "-c", _RENDEZVOUS], ready_line="READY", timeout_s=20)
        assert isinstance(w, proc.Waiting)
        res = w.go(timeout_s=limit)
        assert res.ok and res.stdout.split() == ["loading", "got-go"], res


# a grandchild that leaves the session (setsid) with the command's stdout/stderr still open, and would
# leave a mark if it were not killed
def _escapee(tmp_path: Path) -> tuple[str, Path, Path]:
    pid_file, mark = tmp_path / "escaped.pid", tmp_path / "escaped.finished"
    script = (f"setsid sh -c 'echo $$ > {pid_file}.tmp; mv {pid_file}.tmp {pid_file}; sleep 60; touch {mark}' & "
              f"while [ ! -f {pid_file} ]; do sleep 0.01; done; echo started")  # left the session: then exit
    return script, pid_file, mark


def test_run_kills_a_grandchild_that_left_the_session_holding_the_output(tmp_path):
    script, pid_file, mark = _escapee(tmp_path)
    res = proc.run(["sh", "-c", script + "; exit 4"], timeout_s=40)
    assert res.returncode == 4 and not res.timed_out  # not the 60 s of the escaped grandchild, not a timeout
    assert res.stdout.split() == ["started"]
    # SIGKILL is sent before the result comes back; the escapee is gone a moment later, long before its mark
    _wait_until(lambda: not _alive(int(pid_file.read_text())), "the escaped grandchild to die", 10)
    assert not mark.exists()


def test_go_kills_a_grandchild_that_left_the_session_holding_the_output(tmp_path):
    script, pid_file, mark = _escapee(tmp_path)
    w = proc.start(["sh", "-c", f"echo READY; read x; {script}; exit 0"], ready_line="READY", timeout_s=20)
    assert isinstance(w, proc.Waiting)
    res = w.go(timeout_s=40)
    assert res.ok and res.stdout.split() == ["started"]
    # SIGKILL is sent before the result comes back; the escapee is gone a moment later, long before its mark
    _wait_until(lambda: not _alive(int(pid_file.read_text())), "the escaped grandchild to die", 10)
    assert not mark.exists()


def test_kill_pipe_holders_kills_the_other_ends_only(tmp_path):
    """A writer of a pipe we read dies; a process holding our own (read) end, as a child forked by another
    thread would, and a process holding nothing of it are left alone."""
    r, w = os.pipe()
    holder = subprocess.Popen(["sleep", "60"], stdout=w)
    same_end = subprocess.Popen(["sleep", "60"], stdin=r)
    bystander = subprocess.Popen(["sleep", "60"])
    os.close(w)
    try:
        assert proc.kill_pipe_holders([r]) == [holder.pid]
        assert os.read(r, 10) == b""  # the write end is gone: EOF
        assert holder.wait(10) == -9 and same_end.poll() is None and bystander.poll() is None
    finally:
        os.close(r)
        for p in (same_end, bystander):
            p.kill()
            p.wait()


# a grandchild that leaves the session and lives on, holding the command's pipes in one of two ways: "hide"
# parks stdout/stderr in a unix socket as SCM_RIGHTS data (invisible in /proc/<pid>/fd), "stdin" keeps stdin
# open, never read; its output goes to /dev/null.  It writes its pid, then the leader prints and exits 2.
_HOLDER = """
import array, os, socket, sys, time
mode, pid_file = sys.argv[1], sys.argv[2]
if os.fork() == 0:
    os.setsid()
    if mode == "hide":
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        a.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [1, 2]))])
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2) if mode == "hide" else (1, 2):
        os.dup2(null, fd)
    with open(pid_file + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(pid_file + ".tmp", pid_file)
    time.sleep(60)
    os._exit(0)
while not os.path.exists(pid_file):
    time.sleep(0.01)
print("leader-out", flush=True)
sys.exit(2)
"""


def _run_holder(tmp_path: Path, mode: str, **kw) -> tuple[proc.ProcResult, int]:
    script, pid_file = tmp_path / "holder.py", tmp_path / "holder.pid"
    script.write_text(_HOLDER)
    res = proc.run([sys.executable, str(script), mode, str(pid_file)], timeout_s=40, **kw)
    return res, int(pid_file.read_text())


def test_a_holder_hidden_from_proc_does_not_hold_run(tmp_path):
    """The kit stops reading a finished command's pipes after the grace even when it cannot find (and kill)
    what holds them: the leader's status and output come back, not a timeout."""
    res, holder = _run_holder(tmp_path, "hide")
    try:
        assert res.returncode == 2 and not res.timed_out
        assert res.stdout.strip() == "leader-out"
    finally:
        try:
            os.kill(holder, 9)
        except ProcessLookupError:
            pass


def test_stdin_held_by_an_escaped_grandchild_does_not_hold_run(tmp_path):
    """More stdin than a pipe holds, kept open (unread) by a grandchild that left the session: the leader's
    status, not a timeout, and the holder of our stdin's read end is killed."""
    res, holder = _run_holder(tmp_path, "stdin", stdin_bytes=b"x" * (8 << 20))
    assert res.returncode == 2 and not res.timed_out and res.stdout.strip() == "leader-out"
    _wait_until(lambda: not _alive(holder), "the holder of our stdin to die", 10)


def test_run_feeds_stdin_and_reads_large_output():
    data = os.urandom(3 << 20)
    res = proc.run([sys.executable, "-c", "import sys; d = sys.stdin.buffer.read(); sys.stdout.write(d.hex()); "
                    "sys.stderr.write(str(len(d)))"], stdin_bytes=data, timeout_s=60, log_limit=16 << 20)
    assert res.ok and res.stderr == str(len(data)) and res.stdout == data.hex()


@pytest.mark.parametrize("way", ["launcher", "taskset", "preexec"])
def test_a_command_runs_on_the_cores_it_is_pinned_to(way, monkeypatch):
    """``cpus`` pins the command (through the launcher, util-linux taskset where it is missing, or
    sched_setaffinity where that is missing too)."""
    from kit.host import machine as hostinfo

    if way != "launcher":
        monkeypatch.setattr(launch, "binary", lambda run: None)
    if way == "preexec":
        monkeypatch.setattr(spawn, "_TASKSET", None)
    core = hostinfo.usable_cores()[-1]
    res = proc.run(["grep", "Cpus_allowed_list", "/proc/self/status"], cpus=[core])
    assert res.ok, res.output
    assert res.stdout.split(":")[1].strip() == str(core)
    free = proc.run(["grep", "Cpus_allowed_list", "/proc/self/status"])
    assert hostinfo._parse_list(free.stdout.split(":")[1].strip()) == hostinfo.usable_cores()
