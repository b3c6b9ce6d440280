"""What one record may count for: the record-level rules that :mod:`kit.score.metrics` scores with and that
:mod:`kit.results.shards` and :mod:`kit.run.rundir` resume with.

- **Retried statuses** (:data:`RETRIED`: ``harness_error``, a fault of the kit or the machine): a resumed run
  runs such a job again, and of several records of one job any other status wins over a retried one
  (:func:`dedupe_order`).  ``worker_lost`` is not retried: the candidate may be what kills its worker.  A
  ``timing_failed`` of error kind ``device_lost`` or ``device_busy`` (:data:`RETRIED_TIMING_KINDS`: the adb
  device went away or stayed too loaded or too hot, :mod:`kit.devices`) is retried too: built and verified, it
  waits for the device, and it is no harness error (it counts as correct meanwhile); so is ``no_baseline`` (no
  baseline table entry matched, :mod:`kit.baselines`: retried once one was measured).
- **Scorable speedup** (:func:`scorable_speedup`): only a record of status ``ok`` has one, and only when its
  ``speedup`` is a positive finite ratio that was not measured under emulation (``timing_emulated``), not on
  a task whose native op time is too short to time (``timing_untimeable``), not flagged
  ``implausible_speedup`` (``flags``), and not on a task without a native baseline.  ``timing_failed`` is
  correct but never has one, whatever its speedup fields hold.  Where runs are compared
  (:func:`candidate_speedups`, :func:`best_speedups`), an interval bound that is missing, not finite or not
  positive stands at the speedup itself.
- **Correct** (:func:`is_correct`): a status in :data:`~kit.results.records.CORRECT` (``ok``, ``timing_failed``)
  and an error kind not in :data:`~kit.results.records.CANDIDATE_TIMING_KINDS`: a failure of the candidate's own
  process never counts as "correct, but timing failed" (``timing_failed`` / ``clock_mismatch`` of older kits).
- **Noise band** (:func:`inside_noise`, :func:`beyond_noise`): ``noise_log`` of a task is the half-width of its
  A/A 95 % interval on log scale, ln(ci_high / ci_low) / 2 (``calibration.json``); a speedup s is inside the
  band when |ln s| <= noise_log, and beyond it for a threshold p when s > p · exp(noise_log).
- **Strict** (:func:`edges_pass`): a correct record is strictly correct when it also passed every edge input set
  of its task (``edge_sets``, :mod:`kit.suite.edges`) that native MNN passes.
- **pass@k** (:func:`pass_at_k`, :func:`task_pass_at_k`): the unbiased estimator of Chen et al. (2021); a task
  with n < k samples is scored as if its k - n missing samples had failed.

Older records (schema 1) hold null in ``timing_untimeable`` and ``flags``: null means not set.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import polars as pl

from kit.results.records import CANDIDATE_TIMING_KINDS, CORRECT, IMPLAUSIBLE_SPEEDUP, ErrorKind, Status

#: statuses a resumed run retries (the kit's fault, not the candidate's)
RETRIED: frozenset[Status] = frozenset({Status.HARNESS_ERROR})
#: error kinds of ``timing_failed`` a resumed run retries (the timing device's state, not the candidate's)
RETRIED_TIMING_KINDS: frozenset[ErrorKind] = frozenset({ErrorKind.DEVICE_LOST, ErrorKind.DEVICE_BUSY,
                                                         ErrorKind.NO_BASELINE})
#: record columns the rules read that older frames may lack (absent reads as null: not set)
OPTIONAL_COLUMNS: dict[str, pl.DataType] = {
    "timing_untimeable": pl.Boolean(),
    "flags": pl.List(pl.Struct({"code": pl.String, "reason": pl.String})),
    "edge_sets": pl.List(pl.Struct({"name": pl.String, "ok": pl.Boolean, "native_ok": pl.Boolean,
                                    "reason": pl.String})),
}

_RETRIED = [s.value for s in RETRIED]
_CORRECT = [s.value for s in CORRECT]
_CANDIDATE_KINDS = [k.value for k in CANDIDATE_TIMING_KINDS]


def with_optional_columns(records: pl.DataFrame) -> pl.DataFrame:
    """``records`` with every :data:`OPTIONAL_COLUMNS` column it lacks added as null."""
    missing = {c: t for c, t in OPTIONAL_COLUMNS.items() if c not in records.columns}
    return records.with_columns(pl.lit(None, dtype=t).alias(c) for c, t in missing.items())


def is_retried() -> pl.Expr:
    """Bool: the record is one a resumed run retries (:data:`RETRIED`, :data:`RETRIED_TIMING_KINDS`)."""
    device = (pl.col("status") == Status.TIMING_FAILED.value) & pl.col("error_kind").is_in(
        [k.value for k in RETRIED_TIMING_KINDS])
    return pl.col("status").is_in(_RETRIED) | device


def is_harness_error() -> pl.Expr:
    """Bool: the record's status is one of :data:`RETRIED` (the kit's fault: a failed sample in the metrics)."""
    return pl.col("status").is_in(_RETRIED)


def dedupe_order() -> tuple[list[pl.Expr], list[bool]]:
    """Sort keys and their ``descending`` flags (nulls last) that put first, among the records of one job,
    the one that counts: records of a status not retried before retried ones; among the former the earliest
    ``started_at`` (a job run twice after its worker was presumed lost keeps its first record), among the
    latter the latest (the last try's message).  An empty ``started_at`` sorts last."""
    started = pl.when(pl.col("started_at") == "").then(None).otherwise(pl.col("started_at"))
    keys = [is_retried(), pl.when(~is_retried()).then(started), pl.when(is_retried()).then(started)]
    return keys, [False, False, True]


def is_implausible() -> pl.Expr:
    """Bool: the record carries a flag of code ``implausible_speedup`` (null ``flags``: no flag)."""
    codes = pl.col("flags").list.eval(pl.element().struct.field("code") == IMPLAUSIBLE_SPEEDUP)
    return codes.list.any().fill_null(False)


def is_untimeable() -> pl.Expr:
    """Bool: the record's native op time was too short to time (``timing_untimeable``; null: no)."""
    return pl.col("timing_untimeable").fill_null(False)


def is_correct() -> pl.Expr:
    """Bool: the record is functionally correct (FCR's numerator): its status is one of
    :data:`kit.results.records.CORRECT` and its error kind none of
    :data:`kit.results.records.CANDIDATE_TIMING_KINDS` (:func:`kit.results.records.counts_correct`)."""
    return pl.col("status").is_in(_CORRECT) & ~pl.col("error_kind").is_in(_CANDIDATE_KINDS).fill_null(False)


def _held_failures() -> pl.Expr:
    """Per record, the list of the edge sets (names) the candidate failed and native MNN did not (a set native
    fails is not held against the candidate; null ``native_ok``: native's verdict unknown, held)."""
    e = pl.element().struct
    held = ~e.field("ok") & e.field("native_ok").fill_null(True)
    return pl.col("edge_sets").list.eval(pl.when(held).then(e.field("name"))).list.drop_nulls()


def failed_edges() -> pl.Expr:
    """List[str]: the edge sets a record failed that count against it (:func:`edges_pass`); empty for a record
    without edge sets (older records: null reads as none)."""
    return _held_failures().fill_null(pl.lit([], dtype=pl.List(pl.String)))


def edges_pass() -> pl.Expr:
    """Bool: the record passed every edge set native MNN passes (:func:`kit.results.records.edges_pass`): strict
    correctness is :func:`is_correct` and this."""
    return failed_edges().list.len() == 0


def scorable_speedup(no_native: list[str]) -> pl.Expr:
    """Bool: the record's ``speedup`` may be scored (module docstring); ``no_native``: the task ids without a
    native baseline."""
    return (
        (pl.col("status") == Status.OK.value)
        # a speedup is a positive finite ratio; anything else (NaN, inf, <= 0 from a hand-made table) is not
        & pl.col("speedup").is_finite().fill_null(False)
        & (pl.col("speedup") > 0).fill_null(False)
        & ~pl.col("timing_emulated").fill_null(False)
        & ~is_untimeable()
        & ~is_implausible()
        & ~pl.col("task_id").is_in(no_native)
    )


def scorable_rows(records: pl.DataFrame) -> pl.DataFrame:
    """The records (optional columns filled, :func:`with_optional_columns`) whose speedup may be scored
    (:func:`scorable_speedup`, the tasks without a native baseline taken from these records' ``no_native``
    errors): what a comparison of runs and the between-run estimate read."""
    recs = with_optional_columns(records)
    no_native = recs.filter(pl.col("error_kind") == ErrorKind.NO_NATIVE.value)["task_id"].unique().to_list()
    return recs.filter(scorable_speedup(no_native))


class Speedup(NamedTuple):
    """A scorable speedup (native ms / candidate ms) and its interval (95 % by default, :mod:`kit.stages.timing`);
    a tuple ``(value, low, high)`` as :mod:`kit.score.betweenrun` takes it."""

    value: float
    low: float
    high: float

    def text(self) -> str:
        return f"{self.value:.3g}x [{self.low:.3g}, {self.high:.3g}]"


def candidate_speedups(records: pl.DataFrame) -> dict[tuple[str, str, str], Speedup]:
    """Per candidate ``(method, task_id, sample_id)`` of ``records``, its scorable speedup (:func:`scorable_rows`;
    a bound that is missing, not finite or not positive: the value)."""
    rows = scorable_rows(records).select("method", "task_id", "sample_id", "speedup", "speedup_ci_low",
                                         "speedup_ci_high")
    return {(m, t, s): Speedup(v, _bound(lo, v), _bound(hi, v)) for m, t, s, v, lo, hi in rows.iter_rows()}


def best_speedups(records: pl.DataFrame) -> dict[tuple[str, str], Speedup]:
    """Per ``(method, task_id)``, the largest scorable speedup of its samples (:func:`candidate_speedups`; the
    best-of-k of :mod:`kit.score.metrics`)."""
    out: dict[tuple[str, str], Speedup] = {}
    for (m, t, _s), sp in candidate_speedups(records).items():
        if (m, t) not in out or sp.value > out[(m, t)].value:
            out[(m, t)] = sp
    return out


def _bound(x: float | None, value: float) -> float:
    return x if x is not None and math.isfinite(x) and x > 0 else value


def inside_noise(speedup: pl.Expr, noise_log: pl.Expr) -> pl.Expr:
    """Bool: |ln speedup| <= noise_log (null where either is null)."""
    return speedup.log().abs() <= noise_log


def beyond_noise(speedup: pl.Expr, noise_log: pl.Expr, p: float) -> pl.Expr:
    """Bool: speedup > p · exp(noise_log); true where the task has no noise figure (null ``noise_log``), null
    where the speedup is null."""
    return pl.when(noise_log.is_null()).then(True).otherwise(speedup > p * noise_log.exp())


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k = 1 - C(n-c, k) / C(n, k) for n samples of which c are correct (Chen et al. 2021).

    Computed as 1 - prod_{i=n-c+1..n} (1 - k/i), which never forms large binomials.

    Raises:
        ValueError: k < 1, n < k, or c outside [0, n].
    """
    if k < 1 or n < k or not 0 <= c <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n and 0 <= c <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def task_pass_at_k(n: int, c: int, k: int) -> float:
    """pass@k of one task with n samples, c correct, its missing samples (k - n when n < k) counted as failed:
    :func:`pass_at_k` of max(n, k) samples, i.e. 1 if any sample is correct else 0 when n < k, and 0 for a
    task without records.

    Raises:
        ValueError: k < 1 or c outside [0, n].
    """
    if not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n, got n={n} c={c}")
    return pass_at_k(max(n, k), c, k)
