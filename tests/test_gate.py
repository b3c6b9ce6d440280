"""kit.gate.NodeGate: a timing phase pauses the node's running builds (every process of their session) instead of
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

from kit import proc
from kit.gate import NodeGate

# a gate that never lets the timer in would hang: fail instead
pytestmark = pytest.mark.timeout(120)

# parent and a forked child in a process group of its own (as ninja runs compilers) each append a
# monotonic_ns line every 5 ms until the stop file exists, then one last line
TICKER = textwrap.dedent(
    """
    import os, sys, time
    prefix, stop = sys.argv[1], sys.argv[2]
    pid = os.fork()
    if pid == 0:
        os.setpgid(0, 0)
    side = prefix + (".child" if pid == 0 else ".parent")
    with open(side + ".pid", "w") as f:
        f.write(str(os.getpid()))
    with open(side, "a") as f:
        while not os.path.exists(stop):
            f.write(f"{time.monotonic_ns()}\\n"); f.flush()
            time.sleep(0.005)
        f.write(f"{time.monotonic_ns()}\\n"); f.flush()
    if pid:
        os.waitpid(pid, 0)
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

    def __init__(self, tmp: Path, gate: NodeGate, timeout_s: float = 120) -> None:
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
        for side in ("parent", "child"):
            _wait_until(lambda s=side: len(_ticks(Path(f"{self.prefix}.{s}"))) >= 5, f"the ticker's {side} to run")

    def finish(self) -> proc.ProcResult:
        self.stop.touch()
        self.thread.join(60)
        assert not self.thread.is_alive(), "the build never finished"
        assert self.error is None, self.error
        assert self.result is not None
        return self.result

    def ticks(self) -> dict[str, list[int]]:
        return {side: _ticks(Path(f"{self.prefix}.{side}")) for side in ("parent", "child")}


def test_timing_phase_pauses_a_running_build_and_resumes_it(tmp_path):
    gate = NodeGate(tmp_path / "node.lock")
    build = Build(tmp_path, gate)
    # the timer has its own NodeGate (its own open files), as a Ray actor on the same node would
    with NodeGate(tmp_path / "node.lock").exclusive():
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
    gate = NodeGate(tmp_path / "node.lock")
    build = Build(tmp_path, gate, timeout_s=2.0)
    with NodeGate(tmp_path / "node.lock").exclusive():
        t0 = time.monotonic()
        time.sleep(3.0)  # longer than the build's timeout
        held = time.monotonic() - t0
    res = build.finish()
    assert not res.timed_out and res.ok, res.output
    assert res.paused_s >= held
    assert res.wall_s < 2.0  # wall_s is the running time: the paused seconds are left out


def test_a_killed_timer_lets_the_paused_build_resume(tmp_path):
    gate = NodeGate(tmp_path / "node.lock")
    build = Build(tmp_path, gate)
    held = tmp_path / "held"
    timer = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(
            f"""
            import time
            from pathlib import Path
            from kit.gate import NodeGate
            with NodeGate(Path({str(tmp_path / 'node.lock')!r})).exclusive():
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
    _wait_until(lambda: max(build.ticks()["parent"]) > t1 and max(build.ticks()["child"]) > t1, "the build to resume")
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


def test_a_builder_killed_while_paused_leaves_no_stopped_process(tmp_path):
    """The build's direct child dies with its worker (PR_SET_PDEATHSIG) and a process in another group of
    its session (a compiler under ninja) gets SIGHUP + SIGCONT from the kernel as its group is orphaned with a
    stopped member: nothing stays stopped on the node, even while the timing phase goes on."""
    (tmp_path / "ticker.py").write_text(TICKER)
    prefix, stop = tmp_path / "ticks", tmp_path / "stop"
    builder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(
            f"""
            import sys
            from pathlib import Path
            from kit import proc
            from kit.gate import NodeGate
            with NodeGate(Path({str(tmp_path / 'node.lock')!r})).shared():
                proc.run([sys.executable, {str(tmp_path / 'ticker.py')!r}, {str(prefix)!r}, {str(stop)!r}], timeout_s=600)
            """
        )],
        cwd=Path(__file__).resolve().parent.parent,
    )
    try:
        pid_files = [Path(f"{prefix}.{side}.pid") for side in ("parent", "child")]
        _wait_until(lambda: all(f.exists() and f.read_text() for f in pid_files), "the ticker to start")
        pids = [int(f.read_text()) for f in pid_files]
        with NodeGate(tmp_path / "node.lock").exclusive():
            # SIGSTOP was sent before the gate was let go; the state shows once each process is scheduled
            _wait_until(lambda: [_state(pid) for pid in pids] == ["T", "T"], "the build to be paused", 10)
            builder.send_signal(signal.SIGKILL)
            builder.wait(30)
            _wait_until(lambda: all(_state(pid) in ("-", "Z") for pid in pids), "the paused processes to end")
        assert not stop.exists()  # they ended on their own, not because the ticker was told to stop
    finally:
        if builder.poll() is None:
            builder.kill()
        stop.touch()


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
    gate = NodeGate(tmp_path / "node.lock")
    order: list[str] = []

    def timing() -> None:
        with NodeGate(tmp_path / "node.lock").exclusive():
            order.append("timed")

    with gate.shared():
        timer = threading.Thread(target=timing)
        timer.start()
        _wait_until(lambda: _announced(gate.intent_path), "the timing phase to be announced")
        with gate.shared():  # re-entrant: takes nothing, so it cannot wait for the timer that waits for us
            order.append("nested")
        with pytest.raises(RuntimeError, match="exclusive\\(\\) inside shared\\(\\)"):
            with gate.exclusive():
                pass
        order.append("left")
    timer.join(30)
    assert not timer.is_alive()
    assert order == ["nested", "left", "timed"]


def test_without_a_timing_phase_nothing_pauses(tmp_path):
    gate = NodeGate(tmp_path / "node.lock")
    build = Build(tmp_path, gate)
    time.sleep(0.1)
    res = build.finish()
    assert res.ok and res.paused_s == 0.0 and gate.pauses == 0
    ticks = build.ticks()["parent"]
    assert len(ticks) >= 5
