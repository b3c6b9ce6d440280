"""The scalar reward of ``mkb serve`` (kit.serve.reward, docs/serve.md) and the stage a verdict ended in, on records
made here: each case of the formula, its clip bounds, and the metrics' rules it reuses."""

from __future__ import annotations

import math

import pytest

from kit.results.records import IMPLAUSIBLE_SPEEDUP, ErrorKind, Flag, Record, Status
from kit.serve.reward import LOG_SPEEDUP_HIGH, LOG_SPEEDUP_LOW, reward, significant_speedup
from kit.serve.verdict import ended_in, finished


def rec(status: Status = Status.OK, **fields) -> Record:
    return Record(job_id="j" * 24, method="m", task_id="t", sample_id="0", candidate_sha256="c" * 64,
                  config_digest="d" * 16, status=status, **fields)


def timed(speedup: float, low: float, high: float, **fields) -> Record:
    return rec(Status.OK, speedup=speedup, speedup_ci_low=low, speedup_ci_high=high, native_ms=1.0,
               candidate_ms=1.0 / speedup, timing_s=1.0, verify_s=0.5, build_s=2.0, **fields)


@pytest.mark.parametrize("status", [Status.REJECTED_INPUT, Status.COMPILE_ERROR, Status.COMPILE_TIMEOUT,
                                    Status.VERIFY_MISMATCH, Status.RUNTIME_CRASH, Status.RUNTIME_TIMEOUT,
                                    Status.WORKER_LOST])
def test_a_candidate_that_is_not_correct_earns_zero(status):
    assert reward(rec(status)) == 0.0


def test_a_harness_error_earns_no_reward():
    """The kit's fault says nothing about the candidate: null, not 0."""
    assert reward(rec(Status.HARNESS_ERROR, error_kind=ErrorKind.INTERNAL)) is None


def test_correct_without_timing_earns_one():
    assert reward(rec(Status.OK, verify_s=0.5)) == 1.0


def test_a_significant_speedup_adds_its_log():
    assert reward(timed(2.0, 1.6, 2.5)) == pytest.approx(1.0 + math.log(2.0))
    assert reward(timed(0.8, 0.7, 0.9)) == pytest.approx(1.0 + math.log(0.8))  # significantly slower


def test_a_speedup_whose_interval_holds_one_earns_one():
    assert significant_speedup(timed(1.3, 0.9, 1.8)) is None
    assert reward(timed(1.3, 0.9, 1.8)) == 1.0
    assert reward(timed(0.9, 0.8, 1.01)) == 1.0


def test_the_log_speedup_is_clipped():
    assert reward(timed(0.05, 0.04, 0.06)) == pytest.approx(1.0 + LOG_SPEEDUP_LOW) == pytest.approx(0.5)
    assert reward(timed(50.0, 40.0, 60.0)) == pytest.approx(1.0 + LOG_SPEEDUP_HIGH) == pytest.approx(3.0)


@pytest.mark.parametrize("why", [
    dict(timing_emulated=True),
    dict(timing_untimeable=True),
    dict(flags=[Flag(code=IMPLAUSIBLE_SPEEDUP, reason="too fast")]),
])
def test_a_speedup_the_metrics_would_not_score_earns_one(why):
    """The metrics' rule (kit.results.rules.scorable_speedup): emulated, untimeable or implausible is no speedup."""
    assert reward(timed(3.0, 2.5, 3.5, **why)) == 1.0


def test_timing_failed_is_correct_without_a_speedup():
    assert reward(rec(Status.TIMING_FAILED, speedup=3.0, speedup_ci_low=2.0, speedup_ci_high=4.0)) == 1.0
    # the candidate's own clock tampering is never "correct, timing failed"
    assert reward(rec(Status.TIMING_FAILED, error_kind=ErrorKind.CLOCK_MISMATCH)) == 0.0


def test_the_stage_a_verdict_ended_in():
    assert ended_in(rec(Status.REJECTED_INPUT)) == "screen"
    assert ended_in(rec(Status.COMPILE_ERROR, build_s=1.0)) == "build"
    assert ended_in(rec(Status.VERIFY_MISMATCH, build_s=1.0, verify_s=0.2)) == "verify"
    assert ended_in(rec(Status.RUNTIME_CRASH, build_s=1.0, convert_s=0.1)) == "verify"
    assert ended_in(rec(Status.OK, build_s=1.0, verify_s=0.2)) == "verify"  # correctness only
    assert ended_in(timed(2.0, 1.5, 2.5)) == "time"
    assert ended_in(rec(Status.HARNESS_ERROR)) == "setup"


def test_a_finished_check_carries_the_verdict_mkb_check_prints():
    r = timed(2.0, 1.6, 2.5, native_samples_ms=[1.0, 1.1], candidate_samples_ms=[0.5, 0.6],
              native_samples_round=[0, 1], candidate_samples_round=[0, 1])
    out = finished(r)
    assert out["status"] == "ok" and out["ended_in"] == "time"
    assert out["reward"] == pytest.approx(1.0 + math.log(2.0))
    v = out["verdict"]
    assert v["job_id"] == r.job_id and v["speedup"] == 2.0
    assert v["native_samples"] == 2 and "native_samples_ms" not in v and "candidate_samples_round" not in v
