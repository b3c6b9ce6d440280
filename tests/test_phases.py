"""The job's phase clock (kit.job.phases): every second goes to exactly one phase, lock waits and a command's
paused seconds to ``lock_wait``, and outside a job nothing is charged."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import pytest

from kit.host import proc
from kit.job import phases


class PauseOnce:
    """A pause hook (kit.host.proc.Pausable) that stops the command once for ``seconds``, as a timing phase of
    another process would (kit.host.nodelock's shared hold)."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.asked = seconds, False

    def requested(self) -> bool:
        first, self.asked = not self.asked, True
        return first

    def pause(self, sid: int) -> float:
        time.sleep(self.seconds)
        return self.seconds


def test_the_phases_are_disjoint_and_cover_the_job():
    lock = threading.Lock()
    seconds: dict[str, float] = {}
    t0 = time.monotonic()
    with phases.job_clock(seconds) as clock:
        with phases.charged("build"):
            proc.run(["true"])
            with phases.waiting(lock):  # a lock's wait, then its block in the phase that asked
                assert clock.current == "build"
        with phases.exit_charged("cleanup", _entered_then_left()):
            assert clock.current == "setup"
    total = time.monotonic() - t0
    assert set(seconds) == {"setup", "build", "lock_wait", "cleanup"}
    assert all(s >= 0 for s in seconds.values())
    assert sum(seconds.values()) == pytest.approx(total, abs=0.01)
    with pytest.raises(ValueError, match="unknown job phase 'lunch'"):
        phases.Clock({}).switch("lunch")


@contextmanager
def _entered_then_left():
    yield
    proc.run(["true"])  # what a context's exit does (a restore) is charged to the phase named


def test_a_command_stopped_while_another_process_times_is_a_lock_wait():
    seconds: dict[str, float] = {}
    with phases.job_clock(seconds), phases.charged("build"), proc.pausable(PauseOnce(0.3)):
        r = proc.run(["sleep", "0.2"])
    assert r.ok and r.paused_s == 0.3
    assert seconds["lock_wait"] == pytest.approx(0.3)  # exactly what the hook reported
    assert seconds["build"] >= 0



def test_outside_a_job_the_blocks_only_run():
    lock = threading.Lock()
    with phases.charged("build"), phases.waiting(lock):
        assert lock.locked()
    assert not lock.locked()
