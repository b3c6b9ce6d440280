"""kit.host.nodelock.NodeLock: a timing phase pauses the node's running builds (every process of their session) instead of
waiting for them, resumes them when it ends or when its holder dies, and a paused command's timeout counts only
its running time.  Real processes, real flock, real signals; the builder runs in a thread (flock locks taken
through separate open files conflict within one process as between processes)."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from kit.host import proc
from kit.host.nodelock import NodeLock

# a gate that never lets the timer in would hang: fail instead
pytestmark = pytest.mark.timeout(120)

# the parent, a forked child in a process group of its own (as ninja runs compilers) and a forked sibling in the
# parent's group (as a shell's or cmake's children) each append a monotonic_ns line every 5 ms until the stop
# file exists, then one last line
SIDES = ("parent", "child", "sibling")
TICKER = textwrap.dedent(
    """
    import os, signal, sys, time
    # SIGHUP's default action, as a compiler has (a test run under nohup would otherwise pass SIG_IGN on, and
    # the kernel's SIGHUP + SIGCONT to an orphaned stopped group would resume the ticker instead of ending it)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    prefix, stop = sys.argv[1], sys.argv[2]
    role = "parent"
    if os.fork() == 0:
        os.setpgid(0, 0)
        role = "child"
    elif os.fork() == 0:
        role = "sibling"
    side = prefix + "." + role
    with open(side + ".pid", "w") as f:
        f.write(str(os.getpid()))
    with open(side, "a") as f:
        while not os.path.exists(stop):
            f.write(f"{time.monotonic_ns()}\\n"); f.flush()
            time.sleep(0.005)
        f.write(f"{time.monotonic_ns()}\\n"); f.flush()
    if role == "parent":
        os.wait(); os.wait()
    """
)


def _wait_until(cond, what: str, limit_s: float = 60.0) -> None:
    end = time.monotonic() + limit_s
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.01)


def _ticks(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


class Build:
    """A "build" in a thread: the ticker run through proc.run while holding ``gate`` shared."""

    def __init__(self, tmp: Path, gate: NodeLock, timeout_s: float = 120) -> None:
        self.tmp, self.gate = tmp, gate
        script = tmp / "ticker.py"
        script.write_text(TICKER)
        self.prefix, self.stop = tmp / "ticks", tmp / "stop"
        self.result: proc.ProcResult | None = None
        self.error: BaseException | None = None

        def body() -> None:
            try:
                with gate.shared():
                    self.result = proc.run([sys.executable, script, self.prefix, self.stop], timeout_s=timeout_s)
            except BaseException as exc:  # noqa: BLE001 - reported by finish()
                self.error = exc

        self.thread = threading.Thread(target=body)
        self.thread.start()
        for side in SIDES:
            _wait_until(lambda s=side: len(_ticks(Path(f"{self.prefix}.{s}"))) >= 5, f"the ticker's {side} to run")

    def finish(self) -> proc.ProcResult:
        self.stop.touch()
        self.thread.join(60)
        assert not self.thread.is_alive(), "the build never finished"
        assert self.error is None, self.error
        assert self.result is not None
        return self.result

    def ticks(self) -> dict[str, list[int]]:
        return {side: _ticks(Path(f"{self.prefix}.{side}")) for side in SIDES}


def test_timing_phase_pauses_a_running_build_and_resumes_it(tmp_path):
    gate = NodeLock(tmp_path / "node.lock")
    build = Build(tmp_path, gate)
    # the timer has its own NodeLock (its own open files), as a Ray actor on the same node would
    with NodeLock(tmp_path / "node.lock").exclusive():
        t0 = time.monotonic_ns()
        time.sleep(0.3)  # ~60 ticks per side if anything of the build still ran
        t1 = time.monotonic_ns()
    res = build.finish()
    assert res.ok, res.output
    for side, ticks in build.ticks().items():
        assert min(ticks) < t0 and max(ticks) > t1, f"{side}: the build did not span the timing phase"
        inside = [t for t in ticks if t0 <= t <= t1]
        assert not inside, f"{side} (own process group) ran during the timing phase: {len(inside)} ticks"
    assert gate.pauses == 1
    # the pause covered the whole timing phase and is not counted as running time
    assert res.paused_s >= (t1 - t0) / 1e9
    assert gate.paused_s == pytest.approx(res.paused_s, abs=0.05)


def test_paused_time_does_not_count_towards_the_timeout(tmp_path):
    gate = NodeLock(tmp_path / "node.lock")
    build = Build(tmp_path, gate, timeout_s=2.0)
    with NodeLock(tmp_path / "node.lock").exclusive():
        t0 = time.monotonic()
        time.sleep(3.0)  # longer than the build's timeout
        held = time.monotonic() - t0
    res = build.finish()
    assert not res.timed_out and res.ok, res.output
    assert res.paused_s >= held
    assert res.wall_s < 2.0  # wall_s is the running time: the paused seconds are left out


def test_a_killed_timer_lets_the_paused_build_resume(tmp_path):
    gate = NodeLock(tmp_path / "node.lock")
    build = Build(tmp_path, gate)
    held = tmp_path / "held"
    timer = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(
            f"""
            import time
            from pathlib import Path
            from kit.host.nodelock import NodeLock
            with NodeLock(Path({str(tmp_path / 'node.lock')!r})).exclusive():
                Path({str(held)!r}).write_text(str(time.monotonic_ns()))
                time.sleep(600)
            """
        )],
        cwd=Path(__file__).resolve().parent.parent,
    )
    try:
        _wait_until(held.exists, "the timer to hold the gate")
        t0 = int(held.read_text())
        time.sleep(0.2)
        t1 = time.monotonic_ns()
        timer.send_signal(signal.SIGKILL)
        timer.wait(30)
    finally:
        if timer.poll() is None:
            timer.kill()
    # the kernel released the dead timer's locks: the build resumes on its own
    _wait_until(lambda: all(max(t) > t1 for t in build.ticks().values()), "the build to resume")
    res = build.finish()
    assert res.ok, res.output
    for side, ticks in build.ticks().items():
        assert not [t for t in ticks if t0 <= t <= t1], f"{side} ran while the timer held the gate"
    assert gate.pauses == 1


def _state(pid: int) -> str:
    """The process's state letter from /proc (``-`` when it is gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "-"


BUILDER = """
import sys
from pathlib import Path
from kit.host import proc
from kit.host.nodelock import NodeLock
gate, argv = Path(sys.argv[1]), sys.argv[2:]
with NodeLock(gate).shared():
    proc.run(argv, timeout_s=600)
"""


def _start_builder(tmp: Path, argv: list[str]) -> subprocess.Popen:
    """A builder process: holds the gate ``tmp/node.lock`` shared and runs ``argv`` through proc.run."""
    return subprocess.Popen([sys.executable, "-c", BUILDER, str(tmp / "node.lock"), *argv],
                            cwd=Path(__file__).resolve().parent.parent)


def test_a_builder_killed_while_paused_leaves_no_stopped_process(tmp_path):
    """The build's direct child dies with its worker (PR_SET_PDEATHSIG); a process in another group of its
    session (a compiler under ninja) gets SIGHUP + SIGCONT from the kernel; a process in the leader's own
    group (a shell's child) would stay stopped for ever: the timer reaps it when it leaves the gate."""
    (tmp_path / "ticker.py").write_text(TICKER)
    prefix, stop = tmp_path / "ticks", tmp_path / "stop"
    builder = _start_builder(tmp_path, [sys.executable, str(tmp_path / "ticker.py"), str(prefix), str(stop)])
    try:
        pid_files = [Path(f"{prefix}.{side}.pid") for side in SIDES]
        _wait_until(lambda: all(f.exists() and f.read_text() for f in pid_files), "the ticker to start")
        pids = [int(f.read_text()) for f in pid_files]
        timer = NodeLock(tmp_path / "node.lock")
        with timer.exclusive():
            # SIGSTOP was sent before the gate was let go; the state shows once each process is scheduled
            _wait_until(lambda: [_state(pid) for pid in pids] == ["T"] * 3, "the build to be paused", 10)
            assert list(timer.paused_dir.iterdir()), "the pause was not recorded"
            builder.send_signal(signal.SIGKILL)
            builder.wait(30)
            _wait_until(lambda: _state(pids[0]) in ("-", "Z"), "the direct child to die with the builder")
            assert _state(pids[2]) == "T"  # nothing the kernel does reaches the leader's own group
        # leaving the gate, the timer killed the stopped processes of the dead builder's session
        _wait_until(lambda: all(_state(pid) in ("-", "Z") for pid in pids), "the paused processes to end")
        assert not list(timer.paused_dir.iterdir())
        assert not stop.exists()  # they ended on their own, not because the ticker was told to stop
    finally:
        if builder.poll() is None:
            builder.kill()
        stop.touch()


def test_an_interrupted_pause_kills_the_command_instead_of_resuming_it(tmp_path):
    """SIGINT to a paused builder (KeyboardInterrupt while it waits for the timing phase): the command,
    which ignores SIGTERM, must not run again inside the timing phase."""
    (tmp_path / "ticker.py").write_text(TICKER)
    prefix, stop = tmp_path / "ticks", tmp_path / "stop"
    stubborn = "import signal, runpy, sys; signal.signal(signal.SIGTERM, signal.SIG_IGN); sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0])"
    builder = _start_builder(tmp_path, [sys.executable, "-c", stubborn, str(tmp_path / "ticker.py"), str(prefix),
                                        str(stop)])
    try:
        pid_files = [Path(f"{prefix}.{side}.pid") for side in SIDES]
        _wait_until(lambda: all(f.exists() and f.read_text() for f in pid_files), "the ticker to start")
        pids = [int(f.read_text()) for f in pid_files]
        with NodeLock(tmp_path / "node.lock").exclusive():
            _wait_until(lambda: [_state(pid) for pid in pids] == ["T"] * 3, "the build to be paused", 10)
            t0 = time.monotonic_ns()
            builder.send_signal(signal.SIGINT)
            assert builder.wait(30) != 0
            _wait_until(lambda: all(_state(pid) in ("-", "Z") for pid in pids), "the command to be killed")
            time.sleep(0.1)
            t1 = time.monotonic_ns()
        for side, ticks in _ticks_of(prefix).items():
            assert not [t for t in ticks if t0 <= t <= t1], f"{side} ran again inside the timing phase"
    finally:
        if builder.poll() is None:
            builder.kill()
        stop.touch()


def test_large_stdin_reaches_a_slow_reader_inside_the_gate(tmp_path):
    """The paused path writes stdin as the child reads it (once), and reads megabytes of output whole."""
    import hashlib

    data = os.urandom(1 << 20)  # 1 MiB: far more than a pipe holds, so it is written as the child reads
    reader = ("import hashlib, sys, time; time.sleep(0.2); b = sys.stdin.buffer.read(); "
              "print(len(b), hashlib.sha256(b).hexdigest()); sys.stderr.write('e' * (3 << 20))")
    with NodeLock(tmp_path / "node.lock").shared():
        res = proc.run([sys.executable, "-c", reader], stdin_bytes=data, timeout_s=60, log_limit=8 << 20)
    assert res.ok and not res.timed_out, res.stderr[:200]
    assert res.stdout.split() == [str(len(data)), hashlib.sha256(data).hexdigest()]
    assert res.stderr == "e" * (3 << 20) and not res.truncated
    assert res.paused_s == 0.0


def test_a_command_that_never_ends_still_times_out_inside_the_gate(tmp_path):
    with NodeLock(tmp_path / "node.lock").shared():
        res = proc.run(["sleep", "600"], timeout_s=0.5, grace_s=0.5)
    assert res.timed_out and not res.ok and res.signal in (signal.SIGTERM, signal.SIGKILL)


def _ticks_of(prefix: Path) -> dict[str, list[int]]:
    return {side: _ticks(Path(f"{prefix}.{side}")) for side in SIDES}


def _announced(path: Path) -> bool:
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_nested_shared_does_not_wait_for_an_announced_timing_phase(tmp_path):
    gate = NodeLock(tmp_path / "node.lock")
    order: list[str] = []

    def timing() -> None:
        with NodeLock(tmp_path / "node.lock").exclusive():
            order.append("timed")

    with gate.shared():
        timer = threading.Thread(target=timing)
        timer.start()
        _wait_until(lambda: _announced(gate.intent_path), "the timing phase to be announced")
        with gate.shared():  # re-entrant: takes nothing, so it cannot wait for the timer that waits for us
            order.append("nested")
        with pytest.raises(RuntimeError, match="same thread"):
            with gate.exclusive():
                pass
        order.append("left")
    timer.join(30)
    assert not timer.is_alive()
    assert order == ["nested", "left", "timed"]


def test_a_later_timing_stage_waits_for_all_of_an_earlier_ones_batches(tmp_path):
    """Two timing stages of one node, each two exclusive holds (batches) in its turn: the stage that came second
    waits for the other's second batch too, though the gate is free between the first's batches (where its next
    runners start under the shared hold)."""
    order: list[str] = []
    first_in, second_asks = threading.Event(), threading.Event()

    def stage(name: str) -> None:
        gate = NodeLock(tmp_path / "node.lock")
        if name == "b":
            second_asks.set()
        with gate.turn():
            for batch in (1, 2):
                with gate.exclusive():
                    order.append(f"{name}{batch}")
                    if name == "a" and batch == 1:
                        first_in.set()
                        assert second_asks.wait(30)
                        time.sleep(0.2)  # the second stage now waits for its turn
                if name == "a" and batch == 1:
                    with gate.shared():
                        order.append("a starts")
                    time.sleep(0.2)  # without the turn, the second stage's exclusive hold would come in here

    a = threading.Thread(target=stage, args=("a",))
    a.start()
    assert first_in.wait(30)
    b = threading.Thread(target=stage, args=("b",))
    b.start()
    a.join(30)
    b.join(30)
    assert not a.is_alive() and not b.is_alive()
    assert order == ["a1", "a starts", "a2", "b1", "b2"]
    gate = NodeLock(tmp_path / "node.lock")
    with gate.exclusive(), pytest.raises(RuntimeError, match="same thread"):
        with gate.turn():
            pass


def test_shared_inside_exclusive_raises_instead_of_hanging(tmp_path):
    gate = NodeLock(tmp_path / "node.lock")
    with gate.exclusive():
        with pytest.raises(RuntimeError, match="same thread"):
            with gate.shared():
                pass
        with pytest.raises(RuntimeError, match="same thread"):
            with gate.exclusive():
                pass
    with gate.shared():  # usable again afterwards
        pass


def test_without_a_timing_phase_nothing_pauses(tmp_path):
    gate = NodeLock(tmp_path / "node.lock")
    build = Build(tmp_path, gate)
    time.sleep(0.1)
    res = build.finish()
    assert res.ok and res.paused_s == 0.0 and gate.pauses == 0
    ticks = build.ticks()["parent"]
    assert len(ticks) >= 5


def test_a_starting_runner_is_paused_like_a_build(tmp_path):
    """proc.start under the shared hold (a timing runner loading before its own timing phase) is paused by
    another worker's timing phase like any command, and its rendezvous comes after the phase."""
    script = tmp_path / "loader.py"
    stop = tmp_path / "stop"
    ticks = tmp_path / "ticks"
    script.write_text(textwrap.dedent(f"""
        import os, sys, time
        with open({str(ticks)!r}, "a") as f:
            while not os.path.exists({str(stop)!r}):
                f.write(f"{{time.monotonic_ns()}}\\n"); f.flush()
                time.sleep(0.005)
            f.write(f"{{time.monotonic_ns()}}\\n"); f.flush()
        print("READY", flush=True)
        sys.stdin.readline()
    """))
    gate = NodeLock(tmp_path / "node.lock")
    box: dict[str, object] = {}

    def body() -> None:
        # start and go in one thread: the command dies with the thread that started it (PR_SET_PDEATHSIG)
        with gate.shared():
            waiting = proc.start([sys.executable, script], ready_line="READY", timeout_s=60)
        box["w"] = waiting
        box["res"] = waiting.go(timeout_s=30) if isinstance(waiting, proc.Waiting) else waiting

    thread = threading.Thread(target=body)
    thread.start()
    _wait_until(lambda: len(_ticks(ticks)) >= 5, "the loader to run")
    with NodeLock(tmp_path / "node.lock").exclusive():
        t0 = time.monotonic_ns()
        time.sleep(0.3)
        t1 = time.monotonic_ns()
    stop.touch()
    thread.join(60)
    assert isinstance(box["w"], proc.Waiting)
    res = box["res"]
    assert isinstance(res, proc.ProcResult) and res.ok, res
    inside = [t for t in _ticks(ticks) if t0 < t < t1]
    assert inside == [], f"{len(inside)} ticks of the loading runner inside the timing phase"
    assert any(t > t1 for t in _ticks(ticks)), "the loader never resumed"
    assert gate.pauses >= 1
