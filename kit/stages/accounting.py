"""Accounting for the CPU time of the timing runs from outside the runner, and the forward that must show an op's
saving: two checks of :func:`kit.stages.timing.time_candidate` against work moved out of the stamped intervals.

The candidate's library runs in the runner, so what the runner streams (:mod:`kit.mnn.stamps`) times only what
happens between its stamps; work done elsewhere (in ``onResize`` when the kernel makes MNN resize before each
forward, in a fault handler when the runner reads the outputs after the forward's end stamp, in a wrapped
before-op callback ahead of the op's begin stamp) escapes them.  Two rules, each comparing the candidate's runs
with the native runs of the same rounds:

* **Unaccounted CPU.**  The kernel accounts for every CPU-second of a run: ``wait4``'s rusage of the command and
  every process it waited for (:attr:`kit.host.proc.ProcResult.cpu_s`; a subreaper in front of bubblewrap keeps
  the sandbox's processes in it, :mod:`kit.host.proc.subreaper`), less what the runner's processes had used when
  the kit let it go (``cpu_go_s``: its start-up, read from /proc).  Of that, the forwards account for their
  streamed wall time: every timed forward's, and each warm-up forward at the median timed forward (warm-ups are
  not stamped).  The rest, divided by the forwards run (warm-ups and timed), is the run's *unaccounted CPU per
  forward* (ms): deriving the fresh inputs, the runner's checks, writing the results, its exit, and whatever the
  candidate did outside its forwards.  Per round r: ``e_r = u_candidate,r - u_native,r``; refused (``timing_failed``,
  ``unaccounted_work``) when the lower bound of the paired Student t-interval of mean(e) (``confidence``) exceeds
  :data:`UNACCOUNTED_FLOOR_FRACTION` of the native forward (geometric mean of the rounds' medians) and
  :data:`FLOOR_MS`: more work outside the timed forwards than native does, beyond the rounds' noise.
* **The forward shows the op's saving.**  On the op basis, per round ``op_r`` = native's median op time less the
  candidate's, ``fwd_r`` the same of the whole forward; ``x_r = op_r - fwd_r`` is the op's saving that the forward
  does not show.  Refused (``unaccounted_work`` too) when the candidate claims a saving (mean op_r > 0) and the
  lower bound of mean(x)'s interval exceeds :data:`SHORTFALL_FRACTION` of that saving and :data:`FLOOR_MS`: more
  than half of the op's saving is missing from the forward, beyond the rounds' noise.

Neither rule applies where the figures are missing: a remote runner (adb), a container bridge, a kernel without
schedstat, or a timing without a native side (a baseline table).
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
#: ... and at least this much (ms): below it a time is untimeable here (``timing.min_native_ms``' default)
FLOOR_MS = 0.005
#: the share of an op's saving that may be missing from the forward beyond the rounds' noise
SHORTFALL_FRACTION = 0.5


def cpu_at_go(started: mrunner.StartedRun) -> float | None:
    """CPU seconds the runner's processes have used by now, at its rendezvous (None for a remote runner, behind
    a container bridge, or where /proc cannot tell)."""
    if started.call.settings.remote is not None or proc.current_container() is not None:
        return None
    return proc.session_cpu_s(started.waiting.pid)


def unaccounted_ms(run: mrunner.RunResult, warmup: int) -> float | None:
    """The CPU time (ms) per forward of ``run`` (``warmup`` untimed forwards before its timed ones) that its
    streamed forwards do not account for (see the module's docstring); None where the CPU time is unknown."""
    if run.proc.cpu_s is None or run.cpu_go_s is None or not run.total_ms:
        return None
    after_go_ms = (run.proc.cpu_s - run.cpu_go_s) * 1e3
    accounted_ms = float(np.sum(run.total_ms)) + warmup * float(np.median(run.total_ms))
    return (after_go_ms - accounted_ms) / (len(run.total_ms) + warmup)


def check(candidate: Sequence[mrunner.RunResult], native: Sequence[mrunner.RunResult], basis: str, warmup: int,
          confidence: float) -> None:
    """Refuse a timing whose candidate did work outside its timed intervals (the two rules of the module's
    docstring); ``candidate`` and ``native``: the runs in round order; ``basis``: "op" or "model".

    Raises:
        StageFailure: TIMING_FAILED, ``unaccounted_work``, with both sides' figures in the message."""
    if not native or len(native) != len(candidate):
        return
    native_fwd_ms = geomean(np.asarray([np.median(r.total_ms) for r in native]))
    u_c = [unaccounted_ms(r, warmup) for r in candidate]
    u_n = [unaccounted_ms(r, warmup) for r in native]
    if None not in u_c and None not in u_n:
        _check_unaccounted(np.asarray(u_c, dtype=float), np.asarray(u_n, dtype=float), native_fwd_ms, confidence)
    if basis == "op":
        _check_forward(candidate, native, confidence)


def _check_unaccounted(u_c: np.ndarray, u_n: np.ndarray, native_fwd_ms: float, confidence: float) -> None:
    interval = paired_interval(u_c - u_n, confidence)
    floor = max(FLOOR_MS, UNACCOUNTED_FLOOR_FRACTION * native_fwd_ms)
    if interval is None or interval[0] <= floor:
        return
    raise StageFailure(
        Status.TIMING_FAILED, ErrorKind.UNACCOUNTED_WORK,
        f"unaccounted CPU per forward: candidate {np.median(u_c):.4f} ms, native {np.median(u_n):.4f} ms (medians "
        f"over {u_c.size} rounds; the excess's {confidence:.0%} interval {interval[0]:.4f}..{interval[1]:.4f} ms, "
        f"above {floor:.4f} ms = {UNACCOUNTED_FLOOR_FRACTION:.0%} of the native forward's {native_fwd_ms:.4f} ms): "
        "the candidate did work outside its timed forwards; no speedup")


def _check_forward(candidate: Sequence[mrunner.RunResult], native: Sequence[mrunner.RunResult],
                   confidence: float) -> None:
    op = np.asarray([np.median(n.op_ms) - np.median(c.op_ms) for c, n in zip(candidate, native)])
    fwd = np.asarray([np.median(n.total_ms) - np.median(c.total_ms) for c, n in zip(candidate, native)])
    saving = float(np.mean(op))
    interval = paired_interval(op - fwd, confidence)
    floor = max(FLOOR_MS, SHORTFALL_FRACTION * saving)
    if saving <= 0 or interval is None or interval[0] <= floor:
        return
    raise StageFailure(
        Status.TIMING_FAILED, ErrorKind.UNACCOUNTED_WORK,
        f"the op's saving is not in the forward: the candidate's target ops take {saving:.4f} ms less than "
        f"native's per forward, its whole forward {float(np.mean(fwd)):.4f} ms less (means over {op.size} rounds; "
        f"the shortfall's {confidence:.0%} interval {interval[0]:.4f}..{interval[1]:.4f} ms, above "
        f"{floor:.4f} ms = {SHORTFALL_FRACTION:.0%} of the saving): work moved out of the op's stamps; no speedup")
