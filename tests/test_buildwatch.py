"""The native build's progress: steps planned by ninja's dry run and finished from ``.ninja_log``
(kit.mnn.buildwatch), drawn as a bar or logged every 5 % (kit.host.progress.BuildProgress).

The build tests build the fixture engine for real (cmake + ninja + g++, ~10 s each on 2 cores)."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from kit.host.progress import BuildProgress, StepRate, duration_text, left_text
from kit.mnn import build as mbuild
from kit.mnn import buildwatch
from kit.mnn.native import ensure_native
from kit.mnn.source import ensure_pristine
from kit.mnn.workspace import open_workspace
from kit.settings.config import EvalConfig

needs_toolchain = pytest.mark.skipif(
    not (shutil.which("cmake") and shutil.which("ninja") and shutil.which("g++")), reason="needs cmake, ninja and g++"
)


@pytest.fixture
def fresh(tmp_path, fixture_engine_pristine):
    """A workspace of the fixture engine that was never built, and build options for it."""
    cache = tmp_path / "cache"
    cfg = EvalConfig(mnn={"source_dir": fixture_engine_pristine, "cache_dir": cache, "engine": "fixture"})
    pristine = ensure_pristine(cfg.mnn)
    ws = open_workspace(cache / "ws", pristine)
    opts = mbuild.BuildOptions(engine="fixture", cache_dir=cache, jobs=2, ccache=False)
    yield pristine, ws, opts
    ws.release()


def _ninja_total(log: str) -> int:
    """N of the last ``[i/N]`` line ninja printed while building."""
    return int(re.findall(r"^\[\d+/(\d+)\]", log, re.MULTILINE)[-1])


def _native_lines(caplog: pytest.LogCaptureFixture, label: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "kit" and r.getMessage().startswith(label + ":")]


@pytest.mark.slow
@needs_toolchain
def test_a_real_build_reports_increasing_steps_up_to_the_dry_runs_total(fresh, monkeypatch):
    _, ws, opts = fresh
    monkeypatch.setattr(buildwatch, "POLL_S", 0.02)  # several reports within the fixture's ~10 s build
    seen: list[tuple[int, int, float]] = []
    counter = buildwatch.LogCounter(ws.build / ".ninja_log")  # reads the same log, independently
    res = mbuild.build(ws, opts, progress=lambda done, total, elapsed_s: seen.append((done, total, elapsed_s)))
    assert res.ok, res.log_tail
    total = _ninja_total(res.log_tail)
    assert total > 10  # the fixture engine: 33 steps
    assert {t for _, t, _ in seen} == {total}  # the dry run planned what ninja ran
    dones = [d for d, _, _ in seen]
    assert dones == sorted(set(dones)) and dones[-1] == total
    assert any(0 < d < total for d in dones), dones  # reports while it ran, not only at the end
    elapsed = [e for _, _, e in seen]
    assert elapsed == sorted(elapsed)
    assert counter.poll() == total  # the log itself counts every step, one per command


@pytest.mark.slow
@needs_toolchain
def test_a_callback_that_raises_does_not_fail_the_build(fresh, caplog):
    _, ws, opts = fresh
    assert mbuild.build(ws, opts).ok  # built without a watch first; now one source changed
    touched = ws.src / "source" / "core" / "Tensor.cpp"
    os.utime(touched)  # newer than its object file now
    calls: list[int] = []

    def broken(done: int, total: int, elapsed_s: float) -> None:
        calls.append(done)
        raise RuntimeError("the display is gone")

    with caplog.at_level(logging.WARNING, logger="kit"):
        res = mbuild.build(ws, opts, progress=broken)
    assert res.ok, res.log_tail
    assert len(calls) >= 2 and calls[-1] == _ninja_total(res.log_tail)  # still called after the first failure
    failed = [r for r in caplog.records if "progress display failed" in r.getMessage()]
    assert len(failed) == 1 and "the display is gone" in (failed[0].exc_text or "")


@pytest.mark.slow
@needs_toolchain
def test_the_native_build_logs_its_progress_without_a_terminal(fresh, caplog, monkeypatch):
    pristine, ws, opts = fresh
    monkeypatch.delenv("MKB_PROGRESS", raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # not a terminal: nohup, CI
    with caplog.at_level(logging.INFO, logger="kit"):
        native = ensure_native(opts, pristine, ws)
    assert (native.dir / "done").is_file()
    *lines, finished = _native_lines(caplog, "native fixture build")
    duration = r"(?:\d+ min )?\d+ s"
    parsed = [re.fullmatch(rf"native fixture build: (\d+)/(\d+) steps \((\d+) %\), {duration}"
                           rf"(, about {duration} left)?", line) for line in lines]
    assert all(parsed), lines
    pcts = [int(m[3]) for m in parsed]
    assert pcts[0] == 0 and pcts == sorted(set(pcts))
    assert parsed[-1][1] == parsed[-1][2] and pcts[-1] == 100 and parsed[-1][4] is None  # nothing left at 100 %
    steps = int(parsed[-1][2])
    assert re.fullmatch(rf"native fixture build: {steps} steps in {duration}", finished), finished
    meta = json.loads((native.dir / "meta.json").read_text())
    assert meta["build_steps"] == steps and 0 < meta["build_s"] < 600
    # no bar drawn into a log: what reached stderr, if anything, is log lines (a handler an earlier in-process
    # `mkb` call left on the kit's logger writes there), never a bar's carriage returns or glyphs
    drawn = sys.stderr.getvalue()
    assert "\r" not in drawn and "━" not in drawn
    assert all(re.match(r"\d\d:\d\d:\d\d ", line) for line in drawn.splitlines() if line.strip()), drawn


#: a ninja that plans and configures as the real one (dry runs, cmake's checks), but whose build finishes one
#: step (a line appended to .ninja_log, as ninja writes it) and then hangs, as a hung compiler would
HANGING_NINJA = """#!/bin/sh
case " $* " in
  *" -k "*) printf '0\\t10\\t0\\tfake.o\\tdeadbeef\\n' >> .ninja_log
            echo "[1/2] Building CXX object fake.o"
            exec sleep 60 ;;
esac
exec {real} "$@"
"""


def hanging_ninja(folder: Path) -> Path:
    """``folder`` with a ``ninja`` that hangs after the build's first step (:data:`HANGING_NINJA`); put it first on
    PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    fake = folder / "ninja"
    fake.write_text(HANGING_NINJA.format(real=shutil.which("ninja")))
    fake.chmod(0o755)
    return folder


@pytest.mark.slow
@needs_toolchain
def test_a_build_that_stops_finishing_steps_is_stopped_by_the_stall_limit(fresh, monkeypatch, tmp_path):
    _, ws, opts = fresh
    monkeypatch.setenv("PATH", f"{hanging_ninja(tmp_path / 'bin')}:{os.environ['PATH']}")
    monkeypatch.setattr(buildwatch, "POLL_S", 0.05)
    res = mbuild.build(ws, opts, stall_s=1.0)  # and no total limit: opts.timeout_s (1200 s) is not applied
    assert res.stalled and res.timed_out and not res.ok
    assert res.steps_done == 1 and res.steps_total > 10  # the real dry run planned the fixture's 33 steps
    assert 1.0 <= res.wall_s < 10
    assert "[1/2] Building CXX object fake.o" in res.output


def test_the_stall_limit_counts_running_seconds_since_the_last_finished_step(tmp_path: Path):
    log = tmp_path / ".ninja_log"
    w = buildwatch.BuildWatch(tmp_path, 3, None, poll_s=0.01, stall_s=10.0)
    assert not w.stalled(0.0) and not w.stalled(9.9)
    log.write_text("# ninja log v5\n" + _entry(0, 5, "a.o", "a1"))
    w.counter.poll()  # what the watch's thread does every POLL_S
    assert not w.stalled(12.0) and not w.stalled(21.9)  # a step finished: the 10 s count from 12 s on
    assert w.stalled(22.0) and w.stalled_out and w.stalled(22.1)
    assert not buildwatch.BuildWatch(tmp_path, 3, None).stalled(1e9)  # no stall limit


def test_log_lines_every_5_percent_and_at_the_end(caplog, monkeypatch):
    monkeypatch.delenv("MKB_PROGRESS", raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with caplog.at_level(logging.INFO, logger="kit"), BuildProgress("native MNN build") as progress:
        for done in range(1311):
            progress(done, 1310, done * 190 / 412)
    lines = _native_lines(caplog, "native MNN build")
    assert [int(re.search(r"\((\d+) %\)", line)[1]) for line in lines] == list(range(0, 101, 5))
    assert lines[-1] == "native MNN build: 1310/1310 steps (100 %), 10 min 4 s"
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="kit"), BuildProgress("native MNN build") as progress:
        for done, elapsed_s in ((0, 0.2), (412, 190.4), (420, 195.0)):  # a build that failed at 32 %
            progress(done, 1310, elapsed_s)
    assert _native_lines(caplog, "native MNN build") == [
        "native MNN build: 0/1310 steps (0 %), 0 s",
        "native MNN build: 412/1310 steps (31 %), 3 min 10 s, about 6 min 54 s left",
        "native MNN build: 420/1310 steps (32 %), 3 min 15 s, about 6 min 52 s left",  # the last, logged on leaving
    ]


def test_what_is_left_follows_the_recent_rate_not_the_average():
    rate = StepRate(window_s=120)
    rate.add(0, 0.0)
    rate.add(3, 5.0)
    assert rate.left_s(100) is None  # under 10 s seen: no estimate yet
    for t in range(10, 301, 10):  # 1 step/s for 200 s, then 0.1 step/s
        rate.add(t if t <= 200 else 200 + (t - 200) // 10, float(t))
    # the last 120 s (from the point at 180 s: 180 steps done) saw 30 steps: 90 left take 360 s (the average
    # since the start, 0.7 step/s, would say 129 s)
    assert rate.left_s(300) == pytest.approx((300 - 210) * 120 / (210 - 180))
    assert rate.left_s(210) is None  # done
    stuck = StepRate()
    stuck.add(5, 0.0)
    stuck.add(5, 60.0)
    assert stuck.left_s(10) is None  # no step in the window: no rate


def test_left_text():
    assert [left_text(s) for s in (None, 65.4, 3725)] == ["", "about 1 min 5 s left", "about 1 h 02 min left"]


def test_the_bar_says_what_is_left(monkeypatch):
    monkeypatch.setenv("MKB_PROGRESS", "1")
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with BuildProgress("native MNN build") as progress:
        progress(0, 558, 0.0)
        progress(412, 558, 190.0)
    drawn = sys.stderr.getvalue()
    assert "412/558" in drawn and "about 1 min 7 s left" in drawn and "ETA" not in drawn


def test_with_a_terminal_a_bar_is_drawn_and_nothing_logged(caplog, monkeypatch):
    monkeypatch.setenv("MKB_PROGRESS", "1")
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with caplog.at_level(logging.INFO, logger="kit"), BuildProgress("native MNN build") as progress:
        progress(0, 844, 0.0)
        progress(844, 844, 60.0)
    assert _native_lines(caplog, "native MNN build") == []
    drawn = sys.stderr.getvalue()
    assert "native MNN build" in drawn and "844/844" in drawn


def test_duration_text():
    assert [duration_text(s) for s in (0.4, 59.9, 60, 190.2, 3600 + 5 * 60 + 9)] == [
        "0 s", "59 s", "1 min 0 s", "3 min 10 s", "1 h 05 min"]


def _entry(start: int, end: int, output: str, command_hash: str) -> str:
    return f"{start}\t{end}\t0\t{output}\t{command_hash}\n"


def test_log_counter_counts_commands_appended_after_it_started(tmp_path: Path):
    log = tmp_path / ".ninja_log"
    log.write_text("# ninja log v5\n" + _entry(0, 5, "old.o", "a1"))  # a previous build's
    counter = buildwatch.LogCounter(log)
    assert counter.poll() == 0
    with log.open("a") as f:
        f.write(_entry(0, 7, "x.o", "b1") + _entry(7, 9, "gen.h", "c1") + _entry(7, 9, "gen.cpp", "c1"))
        f.write("9\t12\t0\tpart")  # ninja still writing this line
    assert counter.poll() == 2  # x.o, and the one command with two outputs
    with log.open("a") as f:
        f.write("ial.o\td1\n")
    assert counter.poll() == 3
    # recompaction: ninja replaced the log with a shorter one, then appends to it
    log.write_text("# ninja log v5\n" + _entry(0, 7, "x.o", "b1"))
    assert counter.poll() == 3
    with log.open("a") as f:
        f.write(_entry(12, 20, "y.o", "e1"))
    assert counter.poll() == 4


def test_log_counter_on_a_log_that_does_not_exist_yet(tmp_path: Path):
    log = tmp_path / ".ninja_log"
    counter = buildwatch.LogCounter(log)
    assert counter.poll() == 0
    log.write_text("# ninja log v5\n" + _entry(0, 3, "a.o", "f1"))
    assert counter.poll() == 1
