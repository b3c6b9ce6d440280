"""The timing stage's verdict on a finished run (kit.stages.timingrun.run_failure) and what it counts for: every
failure of the candidate's runner (its process, its stamp stream, its clock, its samples) is one that is not
correct; the native runner's are timing_failed (correct, the machine's) or harness errors.  Runs are built from
their parts, as the runner's result reader builds them."""

from __future__ import annotations

import pytest

from kit.host.proc import ProcResult
from kit.mnn.runner import RunResult
from kit.results.records import ErrorKind as K
from kit.results.records import Status as S
from kit.results.records import counts_correct
from kit.stages.timingrun import run_failure

ITERATIONS = 3


def _run(*, wall_s: float = 0.05, stamp_error: str = "", samples: int = ITERATIONS, returncode: int = 0) -> RunResult:
    """A timing run of ``samples`` forwards of 0.2 ms (0.1 ms of ops) in a 10 ms phase, written by 12 ms, in
    ``wall_s`` of the kit's clock."""
    proc = ProcResult(("mkb_runner",), returncode, "", "", wall_s)
    return RunResult(returncode == 0, {}, [0.1] * samples, [0.2] * samples, {"ArgMax": 1}, "", proc, None, (),
                     10.0, (), 12.0, stamp_error)


@pytest.mark.parametrize(("run", "candidate", "native"), [
    (_run(stamp_error="stamp line 1 (e): an op ends that did not begin"), (S.RUNTIME_CRASH, K.CLOCK_MISMATCH),
     (S.HARNESS_ERROR, K.CLOCK_MISMATCH)),
    (_run(stamp_error="the runner's output was cut at the kit's capture limit: stamps lost"),
     (S.RUNTIME_CRASH, K.CLOCK_MISMATCH), (S.HARNESS_ERROR, K.CLOCK_MISMATCH)),
    (_run(wall_s=1.0), (S.RUNTIME_CRASH, K.CLOCK_MISMATCH), (S.HARNESS_ERROR, K.CLOCK_MISMATCH)),  # a 988 ms gap
    (_run(samples=ITERATIONS - 1), (S.RUNTIME_CRASH, K.EXIT_CODE), (S.TIMING_FAILED, K.INTERNAL)),
    (_run(returncode=8), (S.RUNTIME_CRASH, K.FORBIDDEN), (S.TIMING_FAILED, K.FORBIDDEN)),  # a stamp lost
], ids=["forged_stamp", "flooded_stderr", "clock_gap", "samples", "stamp_lost"])
def test_a_candidates_failed_run_is_never_correct_a_native_ones_may_be(run, candidate, native):
    cand, nat = run_failure(run, ITERATIONS, "candidate", 0), run_failure(run, ITERATIONS, "native", 0)
    assert cand is not None and nat is not None
    assert (cand.status, cand.kind) == candidate
    assert (nat.status, nat.kind) == native
    assert not counts_correct(cand.status, cand.kind)
    assert counts_correct(nat.status, nat.kind) == (nat.status is S.TIMING_FAILED)


def test_a_run_that_keeps_every_rule_counts():
    assert run_failure(_run(), ITERATIONS, "candidate", 0) is None
    assert run_failure(_run(), ITERATIONS, "native", 0) is None
