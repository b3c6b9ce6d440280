"""Timing against a baseline table (``baselines.native_timing = "table"``, :mod:`kit.baselines`): only the
candidate's runs, divided into the native time the table measured on this hardware with this build.

The candidate is run exactly as in an interleaved timing (:func:`kit.stages.timing.run_rounds` without a native
side: the same rounds, inputs, checks of its outputs and clock).  The rule of :mod:`kit.stages.timing` on the
basis holds against the table's native op types: when the candidate's model executes other op types than the
table's native model did, both sides fall back to the whole forward (``timing_basis = "model"``, the table's
``native_model_round_ms``).  ``speedup = geomean(table round medians) / geomean(candidate round medians)``, its
interval Welch's over the two sets of rounds (:func:`kit.stages.speedup.unpaired_estimate`) widened by the
between-run sd of the table's native times (``tau_log_sd``, :meth:`kit.baselines.book.Book.native_tau`): the
two timings are separate runs, so what moves between runs is neither cancelled nor in one run's rounds.  The record
says ``native_timing = "table"`` and ``baseline_key``; its ``native_samples_ms`` stay empty (no native run).
"""

from __future__ import annotations

import time

import numpy as np

from kit.baselines.table import Entry
from kit.host import machine as hostinfo
from kit.results.outcomes import StageFailure, TimingOutcome
from kit.results.records import IMPLAUSIBLE_SPEEDUP, ErrorKind, Flag, Status
from kit.stages import speedup as sspeedup
from kit.stages import timing as stiming
from kit.stages.verify import SideModel
from kit.suite.tasks import Task


def time_against_table(task: Task, candidate: SideModel, entry: Entry, key: str, opts: stiming.TimingOptions,
                       setup: stiming.TimingSetup, tau_log_sd: float = 0.0) -> TimingOutcome:
    """Time ``candidate`` alone (as ``opts`` says, where ``setup`` says: :class:`kit.stages.timing.TimingSetup`)
    and take the native side from ``entry`` of baseline table ``key`` (module docstring); ``tau_log_sd`` the
    between-run sd (ln) the interval is widened by.

    Returns the candidate's samples (ms), the speedup and its interval against the table's round medians,
    ``native_timing = "table"`` and ``baseline_key = key``.

    Raises:
        StageFailure: as :func:`kit.stages.timing.time_candidate`; VERIFY_MISMATCH (``not_executed``) when a target
            op type the table's native model executed did not run in the candidate's.
        kit.stages.timing.AsymmetricTiming: as there.
    """
    t0 = time.monotonic()
    rounds = stiming.run_rounds(task, candidate, None, opts, setup)
    cand_types = rounds.candidate[0].op_types
    stiming.check_executed(task, cand_types, entry.native_op_types)
    basis = "model" if cand_types != entry.native_op_types else "op"
    cs, cr = stiming.samples(rounds.candidate, basis)
    cmed = sspeedup.round_medians(cs, cr) if cs.size else np.empty(0)
    if cs.size == 0 or not np.all(np.isfinite(cs)) or not np.all(cmed > 0):
        raise StageFailure(Status.TIMING_FAILED, ErrorKind.INTERNAL,
                           f"candidate op time is zero or invalid: op types seen {cand_types}")
    native = np.asarray(entry.native_round_ms if basis == "op" else entry.native_model_round_ms, dtype=np.float64)
    est = sspeedup.unpaired_estimate(cmed, native, opts.confidence, tau_log_sd)
    flags = ()
    if est.speedup is not None and est.speedup > opts.implausible_speedup:
        flags = (Flag(code=IMPLAUSIBLE_SPEEDUP, reason=f"speedup {est.speedup:.3g}x is above "
                      f"timing.implausible_speedup = {opts.implausible_speedup:g}x"),)
    out = TimingOutcome(
        candidate_samples_ms=tuple(cs.tolist()), candidate_samples_round=tuple(cr.tolist()),
        candidate_ms=est.candidate_ms, native_ms=est.native_ms, speedup=est.speedup, speedup_ci_low=est.ci_low,
        speedup_ci_high=est.ci_high, basis=basis, rounds=len(rounds.candidate), threads=opts.run.threads,
        precision=opts.run.precision, emulated=bool(opts.run.emulator) or hostinfo.is_emulated(),
        untimeable=bool(est.native_ms is not None and est.native_ms < opts.min_native_ms), flags=flags,
        native_timing="table", baseline_key=key)
    return stiming.finish(out, rounds, t0)
