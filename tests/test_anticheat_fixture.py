"""Hostile candidates on the fixture engine: each way of gaming verification or timing is caught by its check.

One evaluation of the hostile fx_exp candidates (``tests/fixture_engine/candidates/hostile/fx_exp``) beside
the correct sample is shared by the tests of this module; the clock cross-check is tried on the stage itself
with a runner whose own clock loses time (a wrapper that outlives the runner).
"""

from __future__ import annotations

import shutil
import struct
import sys
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
from conftest_fixture import FIXTURE_ROOT
from evalcfg import write_config

from kit.host import sandbox
from kit.job.worker import setup_worker
from kit.outline.evaluate import evaluate
from kit.results.outcomes import StageFailure
from kit.results.records import ErrorKind, Status
from kit.results.shards import scan
from kit.settings.config import load_config
from kit.stages import sequential
from kit.stages import timing as stiming
from kit.stages import timingrun as strun
from kit.stages import verify as sverify
from kit.suite.inputs import make_inputs
from kit.suite.tasks import load_suite

sys.path.insert(0, str(Path(__file__).parent / "adversarial"))
import snippets  # noqa: E402

pytestmark = pytest.mark.slow

HOSTILE = FIXTURE_ROOT / "candidates" / "hostile" / "fx_exp"
TRIALS = 3
#: sample → (status, error kind, text in the message)
EXPECTED = {
    "correct": (Status.OK, ErrorKind.NONE, ""),
    # the static screen stops it before it runs (it defines syscall and libc's clocks); that the runner's clock
    # does not go through libc at all is shown with a preloaded library in test_runner_mnn (real tree)
    "clock_hook": (Status.REJECTED_INPUT, ErrorKind.FORBIDDEN, "raw system calls"),
    "cached_result": (Status.VERIFY_MISMATCH, ErrorKind.VALUE, "first (seed 1)"),
    "correct_first_call": (Status.VERIFY_MISMATCH, ErrorKind.NAN, "first (seed 1)"),
    "writes_input": (Status.VERIFY_MISMATCH, ErrorKind.INPUT_MODIFIED, "input 'x' was modified"),
    "thread_left": (Status.RUNTIME_CRASH, ErrorKind.THREADS_LEFT, "a thread was left running"),
    "correct_first_8_calls": (Status.VERIFY_MISMATCH, ErrorKind.TIMED_OUTPUT_MISMATCH, "still holds the runner's poison"),
    # right only on the seeds it was written for (verification's and the timed sets'): the timed forwards on
    # fresh inputs that the runner checked at random catch it before the verification after timing would
    "memorized": (Status.VERIFY_MISMATCH, ErrorKind.TIMED_OUTPUT_MISMATCH, "checked at random"),
    # written at test time from the engine's own kernel (_hostile_sources): code run after the runner wrote its
    # results, by a static destructor or an atexit handler, never runs (the runner leaves by exit_group): had it
    # run, the zeroed outputs would be a timed_output_mismatch and timing.json's times a fifth of the real ones
    "rewrites_results_in_destructor": (Status.OK, ErrorKind.NONE, ""),
    "rewrites_results_atexit": (Status.OK, ErrorKind.NONE, ""),
    # forwards that skip their work are caught on any timed forward by the runner's check that no float output
    # still holds its poison, also where the kit's comparisons with ONNX Runtime see only outputs that are right
    "skips_timed_but_last_by_argv": (Status.VERIFY_MISMATCH, ErrorKind.TIMED_OUTPUT_MISMATCH,
                                     "still holds the runner's poison"),
    "skips_3_of_4_calls": (Status.VERIFY_MISMATCH, ErrorKind.TIMED_OUTPUT_MISMATCH, "still holds the runner's poison"),
}



def _hostile_sources(engine: Path) -> dict[str, str]:
    """sample → CPUUnary.cpp: the engine's own kernel with code added before ``namespace MNN`` and at the start
    of ``onExecute``."""
    base = (engine / "source" / "backend" / "cpu" / "CPUUnary.cpp").read_text()
    head = "ErrorCode CPUUnary::onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) {\n"
    assert base.count("namespace MNN {\n") == 1 and base.count(head) == 1

    def kernel(top: str, body: str = "") -> str:
        return base.replace("namespace MNN {\n", top + "\nnamespace MNN {\n").replace(head, head + body)

    return {
        "rewrites_results_in_destructor": kernel(snippets.AT_EXIT),
        "rewrites_results_atexit": kernel(snippets.ATEXIT_HANDLER),
        # does nothing on every forward of a timing run but the last two (one per input set)
        "skips_timed_but_last_by_argv": kernel(snippets.ARGV, '''    static int calls = 0;
    if (gIterations > 0 && ++calls <= gWarmup + gIterations - 2) return NO_ERROR;
'''),
        # right on the first 8 calls of a process (more than verification makes), then on every fourth only
        "skips_3_of_4_calls": kernel("", '''    static int calls = 0;
    if (++calls > 8 && calls % 4 != 0) return NO_ERROR;
'''),
    }


def _memorized(task, seeds: list[int]) -> str:
    """A kernel right only on the inputs it was written for (recognised by their first element) and 1 %
    off on any other: it passes verification and timing, whose seeds are known, not the verification after
    timing, whose seeds depend on its own sha256."""
    base = (FIXTURE_ROOT / "candidates" / "sample" / "fx_exp" / "correct" / "CPUUnary.cpp").read_text()
    bits = ", ".join(f"0x{struct.unpack('<I', make_inputs(task, s)['x'].flat[0].tobytes())[0]:08x}u" for s in seeds)
    body = f"""ErrorCode CPUUnary::onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) {{
    static const uint32_t known[] = {{{bits}}};
    const float* x = inputs[0]->host<float>();
    float* y = outputs[0]->host<float>();
    const size_t n = inputs[0]->elementSize();
    uint32_t first;
    std::memcpy(&first, x, sizeof first);
    mProc(y, x, n);
    bool seen = false;
    for (uint32_t k : known) seen = seen || k == first;
    if (!seen) {{
        for (size_t i = 0; i < n; ++i) y[i] *= 1.01f;
    }}
    return NO_ERROR;
}}
"""
    start = base.index("ErrorCode CPUUnary::onExecute")
    end = base.index("class CPUUnaryCreator")
    return base[:start].replace("#include <cmath>\n", "#include <cmath>\n#include <cstdint>\n#include <cstring>\n") + body + "\n" + base[end:]


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory, fixture_engine_pristine, fixture_tasks_dir, fixture_candidates_dir):
    tmp = tmp_path_factory.mktemp("anticheat")
    cands = tmp / "candidates" / "fx_exp"
    shutil.copytree(fixture_candidates_dir / "sample" / "fx_exp" / "correct", cands / "correct")
    for d in HOSTILE.iterdir():
        shutil.copytree(d, cands / d.name)
    task = next(t for t in load_suite(fixture_tasks_dir, "all") if t.id == "fx_exp")
    (cands / "memorized").mkdir()
    known = list(range(TRIALS)) + [stiming.TIMED_SEED_OFFSET + j for j in range(stiming.TIMED_SETS)]
    (cands / "memorized" / "CPUUnary.cpp").write_text(_memorized(task, known))
    for name, text in _hostile_sources(fixture_engine_pristine).items():
        (cands / name).mkdir()
        (cands / name / "CPUUnary.cpp").write_text(text)
    cfg_path = write_config(
        tmp / "cfg.toml", run_dir=tmp / "run", tasks_dir=fixture_tasks_dir, ids=["fx_exp"], method="hostile",
        candidates=tmp / "candidates",
        mnn={"engine": "fixture", "source_dir": fixture_engine_pristine, "cache_dir": tmp / "cache"},
        build={"jobs": 2}, verify={"trials": TRIALS}, timing={"warmup": 1, "iterations": 10, "rounds": 2})
    cfg = load_config(cfg_path)
    assert evaluate(cfg) == 0
    return cfg, task


def test_each_hostile_candidate_is_caught_by_its_check(evaluated):
    cfg, _ = evaluated
    df = scan(cfg.run.dir).collect()
    got = {r["sample_id"]: r for r in df.iter_rows(named=True)}
    assert sorted(got) == sorted(EXPECTED)
    for sample, (status, kind, text) in EXPECTED.items():
        r = got[sample]
        assert (r["status"], r["error_kind"]) == (status.value, kind.value), (sample, r["error_message"])
        assert text in (r["error_message"] or ""), (sample, r["error_message"])


def test_the_verification_after_timing_runs_other_seeds_and_is_recorded(evaluated):
    """An ``ok`` record holds the trials of both verifications; the second's seeds start at verify.seed + 1000
    plus a number from the candidate's sha256."""
    cfg, _ = evaluated
    df = scan(cfg.run.dir).collect()
    for r in df.filter(pl.col("status") == "ok").iter_rows(named=True):
        base = cfg.verify.seed + sverify.REVERIFY_SEED_OFFSET + sverify.reverify_salt(r["candidate_sha256"])
        first = [(k, 1) for k in range(TRIALS)] + [(k, 4) for k in range(cfg.verify.extra_trials)]
        again = [(base + k, 1) for k in range(TRIALS)] + [(base + k, 4) for k in range(cfg.verify.extra_trials)]
        assert [(t["seed"], t["threads"]) for t in r["trials"]] == first + again
        assert all(t["ok"] for t in r["trials"])
    # the kernel right only on known seeds passed verification (its seeds are known) and failed in timing, on
    # the fresh inputs: no verification after timing ran
    memorized = df.filter(pl.col("sample_id") == "memorized").row(0, named=True)
    assert [t["ok"] for t in memorized["trials"]] == [True] * (TRIALS + cfg.verify.extra_trials)


def _slow_clock_runner(tmp: Path, real: Path) -> Path:
    """A runner whose clock misses the last half second of its run: it exits half a second after the real one."""
    wrapper = tmp / "mkb_runner_slow_clock"
    wrapper.write_text(f'#!/bin/sh\n"{real}" "$@"\nrc=$?\nsleep 0.5\nexit $rc\n')
    wrapper.chmod(0o755)
    return wrapper


def test_a_runner_clock_that_loses_time_is_a_clock_mismatch(evaluated, tmp_path):
    """The kit's own wall time of a run (go to exit) is half a second longer than the runner's phase_ms:
    runtime_crash (clock_mismatch: the candidate's runner, not correct) on the candidate's side; on the native
    side (pristine libraries) a harness error."""
    cfg, task = evaluated
    worker = setup_worker(cfg, index=0)
    try:
        model = worker.native_models.model(task)
        assert model is not None
        opts = worker.settings.timing
        opts = replace(opts, run=replace(opts.run, policy=sandbox.Policy()))  # the wrapper runs unconfined
        runner = _slow_clock_runner(tmp_path, worker.native.runner)
        side = sverify.SideModel(model, worker.native_side)
        honest = stiming.time_candidate(task, side, None, opts, stiming.TimingSetup(worker.native.runner,
                                                                                   tmp_path / "honest"))
        assert honest.candidate_ms > 0
        # alone, with looks after 2 and 4 rounds: no speedup to decide, so it stops at the first look
        looks = replace(opts, rounds=4, rounds_min=2, rounds_step=2)
        alone_adaptive = stiming.time_candidate(task, side, None, looks, stiming.TimingSetup(worker.native.runner,
                                                                                            tmp_path / "looks"))
        assert (alone_adaptive.rounds, alone_adaptive.stop) == (2, sequential.STOP_ALONE)
        assert sorted(set(alone_adaptive.candidate_samples_round)) == [0, 1]
        with pytest.raises(StageFailure) as alone:
            stiming.time_candidate(task, side, None, opts, stiming.TimingSetup(runner, tmp_path / "alone"))
        assert (alone.value.status, alone.value.kind) == (Status.RUNTIME_CRASH, ErrorKind.CLOCK_MISMATCH)
        assert "the runner's clock saw" in alone.value.message
        with pytest.raises(StageFailure) as paired:
            stiming.time_candidate(task, side, side, opts, stiming.TimingSetup(runner, tmp_path / "paired"))
        assert (paired.value.status, paired.value.kind) == (Status.HARNESS_ERROR, ErrorKind.CLOCK_MISMATCH)
        assert paired.value.message.startswith("native timing run")
    finally:
        worker.workspace.release()


def test_check_clock_rules():
    """The timed forwards must fit in the phase (same clock), and the phase within the kit's wall time."""
    assert strun.check_clock([1.0, 2.0], 10.0, 20.0) is None
    assert "more than" in strun.check_clock([6.0, 6.0], 10.0, 20.0)  # 12 ms of forwards in a 10 ms phase
    assert "more than" in strun.check_clock([1.0, -1.0], 10.0, 20.0)  # a clock that went back
    assert "kit's" in strun.check_clock([1.0], 30.0, 20.0)  # a phase longer than the whole process
    assert strun.check_clock([1.0], 10.0, 10.0 + strun.CLOCK_SLACK_MS) is None  # within the slack
    assert "apart" in strun.check_clock([1.0], 10.0, 500.0)  # 490 ms the runner's clock did not see
    assert "phase_ms" in strun.check_clock([1.0], None, 20.0)
    # with written_ms (the end of the runner's writes) the gap is measured from there
    assert strun.check_clock([1.0], 10.0, 500.0, written_ms=480.0) is None  # 470 ms of writes, seen by both
    assert "end of its writes" in strun.check_clock([1.0], 10.0, 500.0, written_ms=20.0)
    assert "not between" in strun.check_clock([1.0], 10.0, 500.0, written_ms=5.0)  # ended before its phase
    assert "not between" in strun.check_clock([1.0], 10.0, 500.0, written_ms=600.0)  # longer than the run
    # the ops timed in a forward are part of it: never longer than it
    assert strun.check_clock([1.0, 2.0], 10.0, 20.0, [0.9, 2.0]) is None
    assert "longer than the forward" in strun.check_clock([1.0, 2.0], 10.0, 20.0, [0.9, 2.5])
    assert "negative" in strun.check_clock([1.0, 2.0], 10.0, 20.0, [0.9, -0.1])
    assert "op times for" in strun.check_clock([1.0, 2.0], 10.0, 20.0, [0.9])
