"""Accounting for the CPU time of the timing runs, and the forward that must show an op's saving: two checks of
:func:`kit.stages.timing.time_candidate` against work moved out of the stamped intervals.

The candidate's library runs in the runner, so what the runner streams (:mod:`kit.mnn.stamps`) times only what
happens between its stamps; work done elsewhere (in ``onResize`` when the kernel makes MNN resize before each
forward, in a fault handler when the runner reads its inputs or outputs after the forward's end stamp, in a wrapped
before-op callback ahead of the op's begin stamp) escapes them.  Every figure below is the kernel's, read by a
system call or from outside the process, never from the runner's memory:

* each forward stamp carries the CPU time of the runner's main thread (CLOCK_THREAD_CPUTIME_ID: the process's clock,
  CLOCK_PROCESS_CPUTIME_ID, lags by up to a scheduler tick, measured 4 ms steps here), read by the system call and
  written before any candidate code runs again: the CPU time *between* two timed forwards (fresh inputs,
  the runner's checks, and whatever the candidate did there) is ``cpu(F_i+1) - cpu(E_i)``, its mean over the
  run's gaps (and, less noisy, their 10th percentile and minimum: :data:`STATISTICS`) the run's *unaccounted
  CPU per forward* (ms);
* the kernel's account of the whole run, which the runner's CPU clock must not exceed: ``wait4``'s rusage of the
  command and every process it waited for (:attr:`kit.host.proc.ProcResult.cpu_s`; a subreaper in front of
  bubblewrap keeps the sandbox's processes in it, :mod:`kit.host.proc.subreaper`), less what the runner's processes
  had used when the kit let it go (``cpu_go_s``, read from /proc).  What the stamped span and the warm-ups do not
  account for (:func:`outside_ms`: the runner's exit, its writes, first-call costs) is reported, not refused: an
  honest kernel may do one-time work on its first call (measured: the sample set's slow ArgMax, +0.3 ms per
  forward over native's, at a spread of +-0.5 ms between runs).

Two rules, each over the R rounds, a paired Student t-interval (``confidence``) of the mean of candidate less
native:

* **between forwards**: where the candidate claims to save time (native's median less its own on the speedup's
  basis, mean over the rounds, > 0), refused (``timing_failed``, ``unaccounted_work``) when the lower bound
  exceeds :data:`UNACCOUNTED_SHARE` of that saving, :data:`UNACCOUNTED_FLOOR_FRACTION` of the native forward
  (geometric mean of the rounds' medians) and :data:`FLOOR_MS`: at least half of the claimed saving is spent
  between the timed forwards, beyond the rounds' noise.
* **the forward shows the op's saving**: on the op basis, per round ``op_r`` = native's median op time less the
  candidate's (the saving claimed), and ``extra_r`` = the candidate's median, over its forwards, of the forward's
  time less its target ops' (each forward's own pair: the time inside the forward but outside the target ops'
  stamps, measured by the runner outside the callbacks) less native's: the time the candidate spends in the
  forward that the op's stamps do not show.  Refused when the candidate claims a saving (mean op_r > 0) and the
  lower bound of the mean of ``extra_r - SHORTFALL_FRACTION * op_r`` exceeds :data:`FLOOR_MS` (more than that
  share of the claimed saving is spent elsewhere in the forward), or that of ``extra_r`` exceeds
  :data:`OUTSIDE_OPS_FRACTION` of the native op time (geometric mean of its rounds' medians) and
  :data:`FLOOR_MS`, whatever the saving.  The two are paired per round, so a round in
  which the moved work did not happen (its saving gone with it) only lowers both: compared with the mean saving
  instead, one such round of six widened the interval enough to let a kernel that moved three quarters of its
  work into the runner's before-op callback through (1 of 3 evaluations on the fixture engine).

And the cross-check: a run whose stamped CPU span exceeds the kernel's account of it by more than
:data:`TOTAL_SLACK_MS` + :data:`TOTAL_SLACK_FRACTION` cannot be trusted (``clock_mismatch``; on the native side a
``harness_error``).

Not applied where the figures are missing: a remote runner (adb), a container bridge, a kernel without schedstat
(the cross-check), a timing without a native side (a baseline table).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kit.host import proc
from kit.mnn import runner as mrunner
from kit.results.outcomes import StageFailure
from kit.results.records import ErrorKind, Status
from kit.stages.speedup import geomean, paired_interval

#: the excess of unaccounted CPU per forward (candidate less native) refused beyond the rounds' noise: this share
#: of the native forward's time (a kernel that moves a tenth of the forward's work out gains 1.1x at most) ...
UNACCOUNTED_FLOOR_FRACTION = 0.10
#: ... and at least this much (ms): below it a time is untimeable here (``timing.min_native_ms``' default) ...
FLOOR_MS = 0.005
#: ... and at least this share of the time the candidate claims to save per forward: a kernel's own effect on the
#: caches moves the runner's CPU time between forwards too (measured: the sample set's honest Transpose, a
#: geometry, +0.09-0.14 ms per forward over native's, at a native forward of 0.16 ms; it is slower than native)
UNACCOUNTED_SHARE = 0.5
#: the share of an op's saving that may be missing from the forward beyond the rounds' noise ...
SHORTFALL_FRACTION = 0.5
#: ... and the share of the native target ops' time (and at least :data:`FLOOR_MS`) that the candidate may spend
#: in the forward outside them beyond native's, whatever its saving: with the share of the saving alone, a
#: kernel twice as fast as native could move all its work into a wrapped callback (the excess then half the
#: claimed saving) and claim any speedup; so at most this much of the op moves.  Measured, the honest kernels of
#: the fixture engine: within +-0.003 ms of native's, at native ops of 0.1-0.2 ms
OUTSIDE_OPS_FRACTION = 0.10
#: the statistics of a run's gaps between forwards that the rule compares, each on its own: the mean (work moved
#: out of any share of the forwards shifts it), the 10th percentile and the minimum (interference from other
#: processes only adds CPU time, cache misses, so the low end is the runner's own cost with less noise; work moved
#: out of every forward, or of 9 in 10, shifts it too).  Measured on the loaded 2-core VM (load 6), fixture ArgMax,
#: 10 rounds of 30 forwards, 3 evaluations: per run the gaps' mean varied 1.5-4.5 ms, the 10th percentile 1.3-2.3
#: ms, the minimum 0.2-1.0 ms; the half-width of the excess's interval was 0.13-0.6, 0.02-0.4 and 0.01-0.2 ms
STATISTICS = ("mean", "p10", "min")
#: the fewest rounds the two rules are applied with: their intervals are over rounds, and over two or three (a
#: short protocol, as the adversarial corpus's) a paired interval refused an honest kernel that starts and joins
#: one thread (excess interval 0.025-0.11 ms over 2 rounds); the kit's protocol has 10
MIN_ROUNDS = 5
#: how much more CPU time (ms, and a share of it) the stamps may show than the kernel's account of the run: the
#: two clocks are read at other moments (the kit's /proc reading at go, the runner's first stamp after it)
TOTAL_SLACK_MS, TOTAL_SLACK_FRACTION = 1.0, 0.01


def cpu_at_go(started: mrunner.StartedRun) -> float | None:
    """CPU seconds the runner's processes have used by now, at its rendezvous (None for a remote runner, behind
    a container bridge, or where /proc cannot tell)."""
    if started.call.settings.remote is not None or proc.current_container() is not None:
        return None
    return proc.session_cpu_s(started.waiting.pid)


def between_ms(run: mrunner.RunResult, statistic: str = "mean") -> float | None:
    """The runner's CPU time (ms) between two timed forwards of ``run`` (end stamp to the next begin stamp) over its
    gaps: their ``statistic``, "mean", "p10" (the 10th percentile) or "min"; None without CPU stamps or with a
    single forward."""
    cpu = run.cpu_ns
    if len(cpu) < 2:
        return None
    gaps = [(b[0] - a[1]) / 1e6 for a, b in zip(cpu, cpu[1:])]
    return float({"mean": np.mean, "p10": lambda g: np.percentile(g, 10), "min": np.min}[statistic](gaps))


def outside_ms(run: mrunner.RunResult, warmup: int) -> float | None:
    """The CPU time (ms) per timed forward of ``run`` that its stamped span does not account for: the run's whole
    CPU time after go (the kernel's), less the span from its first begin to its last end stamp (the runner's CPU
    clock) and ``warmup`` untimed forwards at the median forward's CPU time; None where a figure is missing."""
    cpu = run.cpu_ns
    if run.proc.cpu_s is None or run.cpu_go_s is None or not cpu:
        return None
    span_ms = (cpu[-1][1] - cpu[0][0]) / 1e6
    warm_ms = warmup * float(np.median([e - b for b, e in cpu])) / 1e6
    return ((run.proc.cpu_s - run.cpu_go_s) * 1e3 - span_ms - warm_ms) / len(cpu)


def check(candidate: Sequence[mrunner.RunResult], native: Sequence[mrunner.RunResult], basis: str, warmup: int,
          confidence: float) -> None:
    """Refuse a timing whose candidate did work outside its timed intervals (the rules of the module's
    docstring; with fewer than :data:`MIN_ROUNDS` rounds only the cross-check of the kernel's account);
    ``candidate`` and ``native``: the runs in round order; ``basis``: "op" or "model"; ``warmup``: the
    untimed forwards of each run.

    Raises:
        StageFailure: TIMING_FAILED, ``unaccounted_work``, with both sides' figures in the message; TIMING_FAILED
            (HARNESS_ERROR on the native side), ``clock_mismatch``, where the stamps show more CPU time than the
            kernel accounted for the run."""
    for who, runs in (("candidate", candidate), ("native", native)):
        for r, run in enumerate(runs):
            _check_total(run, who, r)
    if not native or len(native) != len(candidate) or len(candidate) < MIN_ROUNDS:
        return
    native_fwd_ms = geomean(np.asarray([np.median(r.total_ms) for r in native]))
    saving = _saving(candidate, native, basis)
    floor = max(FLOOR_MS, UNACCOUNTED_FLOOR_FRACTION * native_fwd_ms, UNACCOUNTED_SHARE * saving)
    outside = _medians([outside_ms(r, warmup) for r in candidate], [outside_ms(r, warmup) for r in native])
    for statistic in STATISTICS if saving > 0 else ():
        mine, theirs = [between_ms(r, statistic) for r in candidate], [between_ms(r, statistic) for r in native]
        if None not in mine and None not in theirs:
            _check_unaccounted(statistic, np.asarray(mine, dtype=float), np.asarray(theirs, dtype=float),
                               (floor, saving, native_fwd_ms), confidence, outside)
    if basis == "op":
        _check_forward(candidate, native, confidence)


def _check_total(run: mrunner.RunResult, who: str, round_: int) -> None:
    """The cross-check of the module's docstring for one run (nothing where a figure is missing)."""
    cpu = run.cpu_ns
    if run.proc.cpu_s is None or run.cpu_go_s is None or not cpu:
        return
    total_ms, span_ms = (run.proc.cpu_s - run.cpu_go_s) * 1e3, (cpu[-1][1] - cpu[0][0]) / 1e6
    if span_ms <= total_ms + TOTAL_SLACK_MS + TOTAL_SLACK_FRACTION * total_ms:
        return
    raise StageFailure(Status.HARNESS_ERROR if who == "native" else Status.TIMING_FAILED, ErrorKind.CLOCK_MISMATCH,
                       f"{who} timing run (round {round_}): its stamps show {span_ms:.3f} ms of CPU time from the "
                       f"first forward to the last, the kernel's account of the whole run after go {total_ms:.3f} ms")


def _medians(candidate: list[float | None], native: list[float | None]) -> str:
    """The report of the figures outside the stamped span (:func:`outside_ms`): both sides' medians, or ""."""
    if None in candidate or None in native or not candidate or not native:
        return ""
    return (f"; outside the stamped span (the kernel's account of the run): candidate "
            f"{np.median(np.asarray(candidate, dtype=float)):.4f} ms, native {np.median(np.asarray(native, dtype=float)):.4f} ms")


def _saving(candidate: Sequence[mrunner.RunResult], native: Sequence[mrunner.RunResult], basis: str) -> float:
    """The time (ms) per forward the candidate claims to save on the speedup's ``basis``: the mean over the rounds of
    native's median less the candidate's."""
    def med(run: mrunner.RunResult) -> float:
        return float(np.median(run.op_ms if basis == "op" else run.total_ms))
    return float(np.mean([med(n) - med(c) for c, n in zip(candidate, native)]))


def _check_unaccounted(statistic: str, u_c: np.ndarray, u_n: np.ndarray, limits: tuple[float, float, float],
                       confidence: float, outside: str) -> None:
    """``limits``: the floor, the claimed saving and the native forward (ms)."""
    floor, saving, native_fwd_ms = limits
    interval = paired_interval(u_c - u_n, confidence)
    if interval is None or interval[0] <= floor:
        return
    raise StageFailure(
        Status.TIMING_FAILED, ErrorKind.UNACCOUNTED_WORK,
        f"unaccounted CPU per forward (the runner's CPU time between its timed forwards, the {statistic} of "
        f"each run's gaps): candidate {np.median(u_c):.4f} ms, native {np.median(u_n):.4f} ms (medians over "
        f"{u_c.size} rounds; the excess's {confidence:.0%} interval {interval[0]:.4f}..{interval[1]:.4f} ms, above "
        f"{floor:.4f} ms: {UNACCOUNTED_SHARE:.0%} of the {saving:.4f} ms the candidate claims to save per forward, "
        f"at least {UNACCOUNTED_FLOOR_FRACTION:.0%} of the native forward's {native_fwd_ms:.4f} ms{outside}): the "
        "candidate did work outside its timed forwards; no speedup")


def _outside_ops_ms(run: mrunner.RunResult) -> float:
    """The median over ``run``'s timed forwards of each forward's time less its target ops' (ms)."""
    return float(np.median(np.asarray(run.total_ms, dtype=float) - np.asarray(run.op_ms, dtype=float)))


def _check_forward(candidate: Sequence[mrunner.RunResult], native: Sequence[mrunner.RunResult],
                   confidence: float) -> None:
    op = np.asarray([np.median(n.op_ms) - np.median(c.op_ms) for c, n in zip(candidate, native)])
    extra = np.asarray([_outside_ops_ms(c) - _outside_ops_ms(n) for c, n in zip(candidate, native)])
    saving = float(np.mean(op))
    if saving <= 0:
        return
    native_op_ms = geomean(np.asarray([np.median(n.op_ms) for n in native]))
    cap = max(FLOOR_MS, OUTSIDE_OPS_FRACTION * native_op_ms)
    for what, x, floor in ((f"that excess less {SHORTFALL_FRACTION:.0%} of the saving, paired by round",
                            extra - SHORTFALL_FRACTION * op, FLOOR_MS),
                           (f"that excess, against {OUTSIDE_OPS_FRACTION:.0%} of the native target ops' "
                            f"{native_op_ms:.4f} ms", extra, cap)):
        interval = paired_interval(x, confidence)
        if interval is None or interval[0] <= floor:
            continue
        raise StageFailure(
            Status.TIMING_FAILED, ErrorKind.UNACCOUNTED_WORK,
            f"the op's saving is not in the forward: the candidate's target ops take {saving:.4f} ms less than "
            f"native's per forward, and it spends {float(np.mean(extra)):.4f} ms more than native inside the "
            f"forward outside them (means over {op.size} rounds; the {confidence:.0%} interval of {what}: "
            f"{interval[0]:.4f}..{interval[1]:.4f} ms, above {floor:.4f} ms): work moved out of the op's stamps; "
            "no speedup")
