"""What a record counts for, by status and error kind: CSR (compiled), FCR (correct), fast_p (a usable speedup)
and whether a resumed run retries it (docs/scoring.md, "Statuses"; kit.results.records.counts_correct,
kit.results.rules).  Each row of the table is scored alone, as the only sample of a one-task split, with a
plausible speedup of 2x (CI low 1.5) that only an ``ok`` record may use."""

from __future__ import annotations

import polars as pl
import pytest

from kit.results import rules
from kit.results.records import ErrorKind as K
from kit.results.records import Record
from kit.results.records import Status as S
from kit.results.shards import records_frame
from kit.score import metrics

TASKS = pl.DataFrame({"task_id": ["t"], "category": ["unary"], "split": ["test"]})

#: status, error kind → compiled (CSR), correct (FCR), fast (fast_1.0), retried on resume
TABLE: list[tuple[S, K, bool, bool, bool, bool]] = [
    (S.OK, K.NONE, True, True, True, False),
    # timing failed for what is not the candidate's process: correct, never fast
    (S.TIMING_FAILED, K.DEVICE_LOST, True, True, False, True),
    (S.TIMING_FAILED, K.DEVICE_BUSY, True, True, False, True),
    (S.TIMING_FAILED, K.NO_BASELINE, True, True, False, True),
    (S.TIMING_FAILED, K.WORKER_LOST, True, True, False, False),
    (S.TIMING_FAILED, K.INTERNAL, True, True, False, False),
    (S.TIMING_FAILED, K.SIGNAL, True, True, False, False),  # the native side's run crashed
    (S.TIMING_FAILED, K.EXIT_CODE, True, True, False, False),  # the native side broke its protocol
    # the candidate's stamp stream or clock (a forged stamp line, a flooded stderr): the stage's runtime_crash,
    # and the timing_failed of kits before it, which counted as correct, no longer do
    (S.RUNTIME_CRASH, K.CLOCK_MISMATCH, True, False, False, False),
    (S.TIMING_FAILED, K.CLOCK_MISMATCH, True, False, False, False),
    # work hidden from the clock (kit.stages.accounting): outputs right, never correct, never fast
    (S.TIMING_FAILED, K.UNACCOUNTED_WORK, True, False, False, False),
    # the candidate's other failures in verification or timing
    (S.RUNTIME_CRASH, K.SIGNAL, True, False, False, False),
    (S.RUNTIME_CRASH, K.EXIT_CODE, True, False, False, False),
    (S.RUNTIME_CRASH, K.LIMIT, True, False, False, False),
    (S.RUNTIME_CRASH, K.FORBIDDEN, True, False, False, False),
    (S.RUNTIME_CRASH, K.THREADS_LEFT, True, False, False, False),
    (S.RUNTIME_CRASH, K.PROCESSES_LEFT, True, False, False, False),
    (S.RUNTIME_TIMEOUT, K.TIMEOUT, True, False, False, False),
    (S.VERIFY_MISMATCH, K.VALUE, True, False, False, False),
    (S.VERIFY_MISMATCH, K.TIMED_OUTPUT_MISMATCH, True, False, False, False),
    (S.VERIFY_MISMATCH, K.INPUTS_FORGED, True, False, False, False),
    (S.VERIFY_MISMATCH, K.INPUT_MODIFIED, True, False, False, False),
    (S.VERIFY_MISMATCH, K.NOT_EXECUTED, True, False, False, False),
    # never built, or the kit's fault
    (S.REJECTED_INPUT, K.FORBIDDEN, False, False, False, False),
    (S.COMPILE_ERROR, K.COMPILER, False, False, False, False),
    (S.COMPILE_TIMEOUT, K.TIMEOUT, False, False, False, False),
    (S.WORKER_LOST, K.WORKER_LOST, False, False, False, False),
    (S.HARNESS_ERROR, K.CLOCK_MISMATCH, False, False, False, True),  # the native side's clock
    (S.HARNESS_ERROR, K.SETUP, False, False, False, True),
]


def _record(status: S, kind: K) -> Record:
    return Record(job_id="m/t/0", method="m", task_id="t", sample_id="0", candidate_sha256="0" * 64,
                  config_digest="cfg", status=status, error_kind=kind, speedup=2.0, speedup_ci_low=1.5,
                  speedup_ci_high=2.5)


def test_the_table_names_every_status():
    assert {row[0] for row in TABLE} == set(S)


@pytest.mark.parametrize(("status", "kind", "compiled", "correct", "fast", "retried"), TABLE,
                         ids=[f"{s.value}-{k.value}" for s, k, *_ in TABLE])
def test_what_a_record_counts_for(status, kind, compiled, correct, fast, retried):
    rec = _record(status, kind)
    assert (rec.compiled, rec.correct) == (compiled, correct)
    frame = records_frame([rec])
    assert frame.select(rules.is_correct()).item() == correct
    assert frame.select(rules.is_retried()).item() == retried
    row = metrics.summary(frame, TASKS, boot=metrics.Bootstrap(n=10)).row(0, named=True)
    assert (row["csr"], row["fcr"], row["fast_1.0"], row["fast_0"]) == (float(compiled), float(correct),
                                                                         float(fast), float(fast))
