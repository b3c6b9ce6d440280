"""Work moved out of the stamped intervals (tests/adversarial/cases_accounting.py) through ``mkb eval`` on the
fixture engine, sandboxed, at the default timing protocol (adaptive, 6 to 10 rounds of 10 + 30 forwards): caught as
``timing_failed`` / ``unaccounted_work`` (kit/stages/accounting.py), while the honest kernels of the same run (the
corpus's honest ArgMax, the one that joins a helper thread in every forward, and the sample set's correct
candidates of every fixture task) stay ``ok``.  And the parts: the kit's subprocess runner accounts for the CPU
time of a sandboxed command's whole tree; the rules on rounds.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from evalcfg import write_config

from kit.host import proc, sandbox, sandbox_check
from kit.mnn import stamps
from kit.outline.evaluate import evaluate
from kit.results.outcomes import StageFailure
from kit.results.shards import read_records
from kit.settings.config import load_config
from kit.stages import accounting

sys.path.insert(0, str(Path(__file__).parent / "adversarial"))
from cases_accounting import CASES  # noqa: E402
from cases_runner import RUNNER_CASES  # noqa: E402
from checks import check_case  # noqa: E402
from corpus import HONEST, TASK, kernel  # noqa: E402

#: the honest kernel that starts and joins a helper thread in every forward, under the rules at the default protocol
JOIN = next(c for c in RUNNER_CASES if c.name == "joins_a_helper_thread")

_NO_BWRAP = sandbox_check.bwrap_works()
#: a command that burns CPU after its rendezvous in a thread, a forked child and itself (~0.5 s in all)
_BURN = ("import os, sys, threading, time\nsys.stdout.write('ready\\n'); sys.stdout.flush(); sys.stdin.readline()\n"
         "def burn(s, clock=time.thread_time):\n    t = clock()\n    while clock() - t < s: pass\n"
         "th = threading.Thread(target=burn, args=(0.2,)); th.start(); th.join()\n"
         "if os.fork() == 0:\n    burn(0.2, time.process_time); os._exit(0)\nos.wait()\nburn(0.1)\n")


@pytest.mark.skipif(bool(_NO_BWRAP), reason=f"needs bubblewrap: {_NO_BWRAP}")
@pytest.mark.parametrize("enabled", [False, True], ids=["plain", "sandboxed"])
def test_the_cpu_time_of_a_command_holds_its_whole_tree(enabled):
    # without the subreaper, bubblewrap's outer process leaves without waiting for the namespace's init: the
    # rusage held 0.004 s of the 0.5 s
    confine = sandbox.Policy(enabled=enabled).confine(ro=[sys.prefix, sys.base_prefix], step="burn")
    waiting = proc.start(["/usr/bin/python3", "-c", _BURN], ready_line="ready", confine=confine, cpu_account=True)
    assert isinstance(waiting, proc.Waiting)
    at_go = proc.session_cpu_s(waiting.pid)
    res = waiting.go(60)
    assert res.ok, res.output
    assert res.cpu_s is not None and at_go is not None
    assert 0.45 <= res.cpu_s - at_go <= 1.5


def test_without_cpu_account_no_cpu_time_is_claimed():
    res = proc.run(["/usr/bin/true"])
    assert res.ok and res.cpu_s is None


class _Run:
    """What accounting reads of a runner's result: the streamed times (ms), the CPU stamps (ns), the kernel's CPU
    seconds of the run and at go."""

    def __init__(self, op_ms, total_ms, cpu_ns, cpu_after_go_ms):
        self.op_ms, self.total_ms, self.cpu_ns = list(op_ms), list(total_ms), cpu_ns
        self.cpu_go_s = 0.05
        self.proc = type("P", (), {"cpu_s": self.cpu_go_s + cpu_after_go_ms / 1e3})()


def _runs(op_ms, fwd_ms, between_ms, rng, outside_ms=1.0, n=10):
    """n runs of 30 timed forwards (warm-up 10): forwards of ``fwd_ms`` whose target ops take ``op_ms`` (5 % noise),
    ``between_ms`` of CPU between two forwards, ``outside_ms`` per forward outside the stamped span (noisy)."""
    out = []
    for _ in range(n):
        op = op_ms * (1 + 0.05 * rng.standard_normal(30))
        fwd = op + (fwd_ms - op_ms)
        cpu, t = [], 0.0
        for f in fwd:
            cpu.append((int(t * 1e6), int((t + f) * 1e6)))
            t += f + between_ms * (1 + 0.02 * rng.standard_normal())
        span_ms = (cpu[-1][1] - cpu[0][0]) / 1e6
        after_go_ms = span_ms + 10 * float(np.median(fwd)) + 30 * outside_ms * (1 + 0.3 * rng.standard_normal())
        out.append(_Run(op, fwd, cpu, after_go_ms))
    return out


def test_the_rules_on_rounds():
    rng = np.random.default_rng(1)
    native = _runs(0.09, 0.10, 0.5, rng)
    # an honest kernel twice as fast: nothing more between or outside its forwards, the forward shows the saving
    accounting.check(_runs(0.045, 0.055, 0.5, rng), native, "op", 10, 0.95)
    # a slower honest kernel that leaves the runner more to do between forwards: it claims no saving
    accounting.check(_runs(0.2, 0.21, 0.6, rng), native, "op", 10, 0.95)
    # a faster honest kernel that costs the runner a little more between forwards (its caches): less than half
    # of its saving
    accounting.check(_runs(0.045, 0.055, 0.51, rng), native, "op", 10, 0.95)
    # half the op's work after the forward's end stamp: between the forwards
    with pytest.raises(StageFailure) as e:
        accounting.check(_runs(0.045, 0.055, 0.545, rng), native, "op", 10, 0.95)
    assert e.value.kind == "unaccounted_work" and "between its timed forwards" in e.value.message
    assert re.search(r"candidate 0\.54\d* ms, native 0\.(49|50)\d* ms", e.value.message)
    # one-time work outside the stamped span (a first call's set-up) is reported, not refused
    accounting.check(_runs(0.045, 0.055, 0.5, rng, outside_ms=3.0), native, "op", 10, 0.95)
    # stamps that show more CPU time than the kernel accounted for the run
    with pytest.raises(StageFailure) as e:
        accounting.check(_runs(0.045, 0.055, 0.5, rng, outside_ms=-3.0), native, "op", 10, 0.95)
    assert e.value.kind == "clock_mismatch" and e.value.status == "timing_failed"
    # the op's work ahead of its begin stamp, inside the forward: the forward does not show the op's saving
    with pytest.raises(StageFailure) as e:
        accounting.check(_runs(0.045, 0.10, 0.5, rng), native, "op", 10, 0.95)
    assert e.value.kind == "unaccounted_work" and "not in the forward" in e.value.message
    # the same over six rounds, in one of which the move did not happen (its saving gone with it): refused, the
    # excess paired with the saving by round (compared with the mean saving, that round's spread let it through)
    native6 = _runs(0.097, 0.107, 0.5, rng, n=6)
    with pytest.raises(StageFailure) as e:
        accounting.check(_runs(0.025, 0.104, 0.5, rng, n=5) + _runs(0.097, 0.107, 0.5, rng, n=1), native6, "op", 10,
                         0.95)
    assert e.value.kind == "unaccounted_work" and "not in the forward" in e.value.message
    # a kernel twice as fast as native that moves all its work ahead of the begin stamp: the excess is half its
    # claimed saving, but more than a tenth of native's op time
    with pytest.raises(StageFailure) as e:
        accounting.check(_runs(0.002, 0.057, 0.5, rng), native, "op", 10, 0.95)
    assert e.value.kind == "unaccounted_work" and "of the native target ops'" in e.value.message
    # no native side (a baseline table): nothing to compare with
    accounting.check(_runs(0.045, 0.10, 0.545, rng), [], "op", 10, 0.95)


def test_the_stamps_carry_the_cpu_time():
    lines = ["@mkbt F 1 10 100", "@mkbt b 11 ArgMax", "@mkbt e 20", "@mkbt E 1 30 120",
             "@mkbt F 2 40 200", "@mkbt b 41 ArgMax", "@mkbt e 50", "@mkbt E 2 60 220"]
    assert stamps.parse(lines, 2).cpu_ns == [(0x100, 0x120), (0x200, 0x220)]
    assert stamps.parse([ln.rsplit(" ", 1)[0] if ln[6] in "FE" else ln for ln in lines], 2).cpu_ns == []
    with pytest.raises(stamps.StampError, match="others do not"):
        stamps.parse(lines[:3] + ["@mkbt E 1 30"] + lines[4:], 2)
    with pytest.raises(stamps.StampError, match="went back"):
        stamps.parse(lines[:4] + ["@mkbt F 2 40 110"] + lines[5:], 2)


@pytest.fixture(scope="module")
def accounting_run(tmp_path_factory, fixture_engine_pristine, fixture_tasks_dir, fixture_candidates_dir):
    tmp = tmp_path_factory.mktemp("accounting")
    for case in (HONEST, JOIN, *CASES):
        d = tmp / "cands" / TASK / case.name
        d.mkdir(parents=True)
        for name, data in kernel(fixture_engine_pristine, case).items():
            (d / name).write_bytes(data)
    tasks = sorted(p.name for p in (fixture_candidates_dir / "sample").iterdir())
    for task in tasks:
        shutil.copytree(fixture_candidates_dir / "sample" / task / "correct", tmp / "sample" / task / "correct")
    cfg_path = write_config(
        tmp / "cfg.toml", run_dir=tmp / "run", tasks_dir=fixture_tasks_dir, ids=tasks, method="adversarial",
        candidates=tmp / "cands", more_sources={"sample": tmp / "sample"},
        mnn={"engine": "fixture", "source_dir": fixture_engine_pristine, "cache_dir": tmp / "cache", "check_tree": False},
        build={"jobs": 1, "candidate_timeout_s": 120},
        verify={"trials": 2, "extra_trials": 1, "run_timeout_s": 20, "convert_timeout_s": 30, "memory_limit_mb": 1024},
        sandbox={"mode": "bwrap", "build_memory_mb": 1024, "file_mb": 64})
    cfg = load_config(cfg_path)
    assert (cfg.timing.rounds_min, cfg.timing.rounds_max, cfg.timing.iterations) == (6, 10, 30)  # the default protocol
    assert evaluate(cfg) == 0
    return read_records(cfg.run.dir)


@pytest.mark.slow
@pytest.mark.skipif(bool(_NO_BWRAP), reason=f"needs bubblewrap: {_NO_BWRAP}")
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_work_outside_the_timed_intervals_is_refused(accounting_run, case):
    check_case(accounting_run, case)
    row = accounting_run.filter(accounting_run["sample_id"] == case.name).to_dicts()[0]
    assert row["speedup"] is None or row["status"] != "ok"


@pytest.mark.slow
@pytest.mark.skipif(bool(_NO_BWRAP), reason=f"needs bubblewrap: {_NO_BWRAP}")
def test_honest_kernels_stay_ok(accounting_run):
    honest = accounting_run.filter(accounting_run["sample_id"].is_in([HONEST.name, JOIN.name, "correct"])).to_dicts()
    assert len(honest) == 6
    assert [(r["task_id"], r["status"], r["error_message"][:300]) for r in honest if r["status"] != "ok"] == []
