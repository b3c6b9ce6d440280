"""Timing: native vs candidate with the same runner, inputs, threads, precision and cores, interleaved in rounds.

Each round runs both sides once (order alternates: N C, C N, N C, ... to cancel order effects); a side's
run is ``warmup`` untimed then ``iterations`` timed forward passes in a fresh runner process pinned to the
timing cores, started (model loaded, inputs read) before the node's exclusive timing phase and let go inside
it.  A sample is the summed time (ms) of the task's target MNN op types in one forward pass (per-op
callbacks).  If the two sides execute different op-type counts (a candidate that lowers the op differently),
both fall back to the whole-model time (``timing_basis = "model"``), so a candidate cannot win by moving
work out of the measured op types.

Statistic (most of the variation is between runs, i.e. processes, not between the iterations of one run;
measured on MNN 3.2.2, 1 thread: an interval resampling single iterations excluded 1.0 for 28 of 36 native
vs native tasks): per round, each side's median; ``d_r = ln(native median_r / candidate median_r)``, paired
within the round so that a drift of the host's speed cancels; ``speedup = exp(mean d_r)`` (so ``native_ms``
and ``candidate_ms`` are the geometric means of the rounds' medians and ``speedup = native_ms /
candidate_ms``), and its ``confidence`` interval ``exp(mean d_r +- t_{(1+c)/2, R-1} * sd(d_r) / sqrt(R))``
(Student t over the R rounds; a paired t-interval on the log scale).  The runs of both sides must have the
same invocation digest (:meth:`kit.mnn.runner._Call.invocation_sha256`), and run on exactly the timing
cores; otherwise the timing is a harness error, not the candidate's.  With a remote runner (``run.remote``: an adb
device, :mod:`kit.devices`) the runs and the conditions (governor, frequency, load, the device's state) are the
device's.

Against a candidate that games the timing (the runner loads the candidate's library, so code of the candidate
runs inside the measuring process): every run's first timed forwards run on :data:`TIMED_SETS` input sets (seeds
``seed + TIMED_SEED_OFFSET + j``, the same on both sides), every other forward on fresh inputs the runner
derives from them (no input repeats, so a cache keyed on the input's content never hits); a timed forward that
left a float output unwritten is runner exit 6; the first outputs on each set and ``checked_forwards`` forwards
per run on fresh inputs, picked by the runner at random after each forward, are compared with ONNX Runtime (the
task's tolerance) for the candidate's runs (:mod:`kit.stages.timedcheck`; all ``timed_output_mismatch``, a
``verify_mismatch``); the runner leaves by exit_group right after writing its results (no destructor of the
candidate's runs after them); and the runner's clock is checked against the kit's and its times against each
other (:func:`check_clock`: ``clock_mismatch``, ``timing_failed``).  None of these is ever a speedup.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from kit import hostinfo
from kit.inputs import make_inputs
from kit.mnn import runner as mrunner
from kit.outcomes import NativeProfile, StageFailure, TimingOutcome
from kit.records import IMPLAUSIBLE_SPEEDUP, ErrorKind, Flag, Status
from kit.stages import speedup as sspeedup
from kit.stages.timedcheck import check_timed_outputs
from kit.stages.verify import References, Side, process_failure, protocol_failure
from kit.tasks import Task

#: input sets a timing run alternates between (fewer when ``iterations`` is smaller)
TIMED_SETS = 2
#: their seeds are ``seed + TIMED_SEED_OFFSET + j``: other inputs than verification's (``seed + k``)
TIMED_SEED_OFFSET = 500
#: how much shorter than the kit's own wall time of a run (from writing "go" to the runner's exit) the runner's
#: ``phase_ms`` (from reading "go" to its last timed forward) may be: CLOCK_SLACK_MS plus CLOCK_SLACK_FRACTION of
#: the kit's time.  The gap of honest runs is the runner writing its outputs and exiting: measured with 2 sets,
#: 10 + 30 forwards, on the 2-core dev VM under a load of 5: fixture engine (fx_exp, fx_argmax, fx_transpose;
#: phases of 12-20 ms), 90 runs: median 4.6-5.9 ms, at most 17.5 ms; MNN 3.2.2 (hard_sigmoid_4d, conv2d_1x7,
#: softmax_last_2d, matmul_2d_rect, resize_bilinear_x2, transpose_nchw_to_nhwc; phases of 23-224 ms), 180 runs:
#: median 3.7-14 ms, at most 53 ms.  The fraction covers hosts where everything is slower (emulation).  Since
#: the fresh-input protocol the runners also write the checked forwards' inputs and outputs after the phase (a
#: 4 MB transpose: 262 ms from its last forward to its exit at a load of 5-8), so the runner's ``written_ms``
#: (its clock at the end of those writes) is what is compared now; the gap left is its exit.
CLOCK_SLACK_MS = 100.0
CLOCK_SLACK_FRACTION = 0.10
#: rounding allowed per time the runner printed, ms (the runners print 6 decimals, or 9 significant digits)
_PRINT_MS = 1e-3


class AsymmetricTiming(Exception):
    """The two sides of a timing did not run alike (other runner settings, other cores): a fault of the kit,
    never the candidate's (the pipeline records a ``harness_error``)."""


@dataclass(frozen=True)
class TimingOptions:
    """``rounds`` interleaved rounds of ``warmup`` untimed and ``iterations`` timed forward passes per side,
    each run within ``timeout_s`` seconds (each half); ``confidence`` of the speedup's interval; ``seed``
    draws the inputs; ``run``: threads, precision, memory limit and cores of the runner (the same as
    verification's, plus the cores); ``min_native_ms``: a native op time below it is untimeable;
    ``implausible_speedup``: a speedup above it is flagged; ``checked_forwards``: timed forwards on fresh inputs
    per run that the runner picks at random and the kit compares with ONNX Runtime."""

    warmup: int = 10
    iterations: int = 30
    rounds: int = 10
    confidence: float = 0.95
    timeout_s: float = 300.0
    seed: int = 0
    run: mrunner.RunSettings = mrunner.RunSettings()
    min_native_ms: float = 0.0
    implausible_speedup: float = 10.0
    checked_forwards: int = 2

    def settings(self, task: Task) -> mrunner.RunSettings:
        """The runner settings of one timing run of ``task``: the same for both sides."""
        return replace(self.run, warmup=self.warmup, iterations=self.iterations,
                       op_types=tuple(task.mnn_op_types), timeout_s=self.timeout_s, checked=self.checked_forwards)


def _started(task: Task, runner: Path, model: Path, side: Side, inputs, scratch: Path, opts: TimingOptions,
             what: str) -> mrunner.StartedRun:
    """Start one timing run up to the runner's rendezvous (model loaded, inputs read).

    Raises:
        StageFailure: as :func:`_check` when the runner fails before it (or breaks its protocol: :func:`_protocol`).
    """
    with _protocol(what):
        started = mrunner.start_model(side.runner or runner, model, inputs, [o.name for o in task.outputs], side.lib_dir,
                                      opts.settings(task), scratch=scratch)
    if isinstance(started, mrunner.RunResult):
        _check(started, what)
        status = Status.TIMING_FAILED if what == "native" else Status.RUNTIME_CRASH
        raise StageFailure(status, ErrorKind.EXIT_CODE, f"{what} timing run: the runner exited (status 0) before "
                           f"its rendezvous")
    return started


def _go(started: mrunner.StartedRun, opts: TimingOptions, what: str, round_: int | None = None) -> mrunner.RunResult:
    """Run a started timing run (warm-up and timed iterations; ``round_`` names it in messages) and check its
    samples and its clock (:func:`check_clock`; the kit's own time of the run is ``proc.wall_s``, from writing
    "go" to the exit).

    Raises:
        StageFailure: TIMING_FAILED for a wrong number of samples or a clock mismatch of the candidate's runner,
            and for any failure of the native runner; RUNTIME_CRASH / RUNTIME_TIMEOUT / VERIFY_MISMATCH for a
            failure of the candidate's runner (:func:`_check`, :func:`_protocol`); HARNESS_ERROR
            (``clock_mismatch``, ``timed_output_mismatch``) for those of the native runner (the pristine
            libraries: the host stalled or the kit is wrong).
    """
    with _protocol(what):
        res = started.go()
    _check(res, what, round_)
    if len(res.op_ms) != opts.iterations:
        raise StageFailure(
            Status.TIMING_FAILED, ErrorKind.INTERNAL, f"{what}: {len(res.op_ms)} samples, expected {opts.iterations}"
        )
    wrong = check_clock(res.total_ms, res.phase_ms, res.proc.wall_s * 1e3, res.op_ms, res.written_ms)
    if wrong is not None:
        status = Status.HARNESS_ERROR if what == "native" else Status.TIMING_FAILED
        raise StageFailure(status, ErrorKind.CLOCK_MISMATCH, f"{what} timing run: {wrong}")
    return res


def check_clock(total_ms: list[float], phase_ms: float | None, kit_ms: float,
                op_ms: list[float] | None = None, written_ms: float | None = None) -> str | None:
    """Why a timing run's clock cannot be trusted, or None: the ops timed in each forward (``op_ms``) must fit
    in that forward (``total_ms[i]``: the ops run between the forward's two clock reads), the timed forwards
    (the runner's clock) must fit in its ``phase_ms`` (the same clock, the interval they are part of), which must
    lie within the kit's own wall time ``kit_ms`` of the run and be shorter by no more than
    :data:`CLOCK_SLACK_MS` + :data:`CLOCK_SLACK_FRACTION` of it (all milliseconds); no time is negative.  A
    runner whose clock was slowed, stopped or rewound (code in the candidate's library replacing or patching
    it), or whose timing.json was rewritten, fails one of these where the numbers no longer agree.  (A rewrite
    that scales every time alike keeps them agreeing but for the kit's wall time; that it cannot happen after
    the runner wrote them is the runner's doing: it leaves by exit_group at once.)  With ``written_ms`` (the
    runner's clock when it had written its results, timing.json last) the kit's time is compared with that
    instead, and ``phase_ms`` must lie within it: writing the outputs on a loaded host is then not taken for
    a slowed clock."""
    if phase_ms is None:
        return "the runner wrote no phase_ms"
    if op_ms is not None:
        if len(op_ms) != len(total_ms) or min(op_ms, default=0.0) < 0:
            return f"{len(op_ms)} op times for {len(total_ms)} forwards, or one is negative"
        over = [i for i, (op, tot) in enumerate(zip(op_ms, total_ms)) if op > tot + 2 * _PRINT_MS]
        if over:
            i = over[0]
            return (f"the timed ops of {len(over)} forwards took longer than the forward they are part of; first: "
                    f"forward {i + 1}, {op_ms[i]:.6f} ms of ops in {total_ms[i]:.6f} ms")
    timed = float(sum(total_ms))
    if timed > phase_ms + _PRINT_MS * (len(total_ms) + 1) or min(total_ms, default=0.0) < 0:
        return (f"its timed forwards add up to {timed:.3f} ms (the runner's clock), more than the {phase_ms:.3f} ms "
                f"of the phase they are part of, or one is negative")
    if phase_ms > kit_ms + 1.0:
        return f"the runner's clock saw {phase_ms:.3f} ms from go to its last forward, the kit's {kit_ms:.3f} ms for all of the run"
    end_ms, until = phase_ms, "its last timed forward"
    if written_ms is not None:
        if written_ms + _PRINT_MS < phase_ms or written_ms > kit_ms + 1.0:
            return (f"the runner's clock saw {written_ms:.3f} ms from go to the end of its writes, not between its "
                    f"phase ({phase_ms:.3f} ms) and the kit's {kit_ms:.3f} ms for all of the run")
        end_ms, until = written_ms, "the end of its writes"
    slack = CLOCK_SLACK_MS + CLOCK_SLACK_FRACTION * kit_ms
    if end_ms < kit_ms - slack:
        return (f"the runner's clock saw {end_ms:.3f} ms from go to {until}, the kit's "
                f"{kit_ms:.3f} ms from go to the runner's exit: more than {slack:.1f} ms apart")
    return None


@contextmanager
def _protocol(what: str) -> Iterator[None]:
    """A runner that breaks its protocol during timing: the candidate's code in it (RUNTIME_CRASH, ``exit_code``
    or ``forbidden``: :func:`kit.stages.verify.protocol_failure`); on the native side TIMING_FAILED
    (``exit_code``)."""
    try:
        yield
    except mrunner.RunnerProtocolError as exc:
        if what != "native":
            raise protocol_failure(exc, f"{what} timing run") from None
        raise StageFailure(Status.TIMING_FAILED, ErrorKind.EXIT_CODE, f"{what} timing run: runner broke its "
                           f"protocol: {exc}") from None


def _check(res: mrunner.RunResult, what: str, round_: int | None = None) -> None:
    """Raise the failure of a finished timing run, if it failed.

    The candidate's runner: as in verification (:func:`kit.stages.verify.process_failure`): a signal, a bad
    exit or a limit is RUNTIME_CRASH, a timeout RUNTIME_TIMEOUT, the runner's own verdicts theirs; never
    TIMING_FAILED, which counts as correct: a kernel that traps once it has been verified (wrong after 8 calls,
    crashing instead of returning wrong outputs) scored timing_failed, correct.  The native runner (pristine
    libraries): TIMING_FAILED, the machine's fault (HARNESS_ERROR where its kernels gave other bytes on the
    same inputs: the host or the kit).

    Raises:
        StageFailure: as above."""
    fail = process_failure(res.proc, f"{what} timing run" + (f" (round {round_})" if round_ is not None else ""))
    if fail is None:
        return
    if what != "native":
        raise fail
    status = Status.HARNESS_ERROR if fail.kind == ErrorKind.TIMED_OUTPUT_MISMATCH else Status.TIMING_FAILED
    raise StageFailure(status, fail.kind, fail.message, signal=fail.signal)


def _plan(rounds: int, with_native: bool) -> list[tuple[str, int]]:
    """(who, round) of every run: the order alternates per round, N C, C N, ... (candidate only without a
    native side)."""
    plan = []
    for r in range(rounds):
        for who in (["native", "candidate"] if r % 2 == 0 else ["candidate", "native"]):
            if who == "candidate" or with_native:
                plan.append((who, r))
    return plan


def check_symmetric(plan: list[tuple[str, int]], started: list[mrunner.StartedRun], cores: tuple[int, ...]) -> dict[str, str]:
    """The invocation digest of each side (``{"native": sha, "candidate": sha}``) after checking that every
    run of both sides has the same one, and that each runner is allowed exactly ``cores`` (where that can be
    read).

    Raises:
        AsymmetricTiming: the runs differ in anything but their model and libraries, or run elsewhere."""
    digests: dict[str, set[str]] = {}
    for (who, _), run in zip(plan, started):
        digests.setdefault(who, set()).add(run.invocation_sha256)
        allowed = run.allowed_cores() if cores else None
        if allowed is not None and sorted(allowed) != sorted(cores):
            raise AsymmetricTiming(f"the {who} runner (pid {run.waiting.pid}) may run on cores {list(allowed)}, "
                                   f"not only the timing cores {list(cores)}")
    every = set().union(*digests.values())
    if len(every) != 1:
        raise AsymmetricTiming("native and candidate timing runs were invoked differently (runner invocation "
                               f"digests {sorted(digests.get('native', ()))} vs {sorted(digests.get('candidate', ()))})")
    sha = every.pop()
    return {who: sha for who in digests}


def time_candidate(
    task: Task,
    runner: Path,
    candidate: tuple[Path, Side],
    native: tuple[Path, Side] | None,
    scratch: Path,
    opts: TimingOptions,
    hold: Callable[[], AbstractContextManager[object]] = nullcontext,
    prepare: Callable[[], AbstractContextManager[object]] = nullcontext,
    refs: References | None = None,
    onnx: Path | None = None,
) -> TimingOutcome:
    """Time ``candidate`` (model, side) against ``native`` (or alone when ``native`` is None).

    Every run's runner is started first, inside ``prepare()`` (the node's shared hold: the start-up of a runner
    is work like a build), up to its rendezvous; then, inside ``hold()`` (the node's exclusive timing phase),
    the conditions are read (governor, frequency, load) and each run in turn does its warm-up and timed
    iterations.  The inputs are drawn before and the statistics computed after, and so are the candidate's
    timed outputs compared with ONNX Runtime (``refs``: references computed elsewhere, by seed): the node is
    held exclusively for the measured runs alone.  ``onnx``: the task's ONNX model for the references of the
    forwards the runner checked at random (default ``task.onnx_path``; a timing node gets it shipped).

    Raises:
        StageFailure: TIMING_FAILED when a native run fails, when a run yields no usable samples or its clock
            disagrees with the kit's (``clock_mismatch``); RUNTIME_CRASH / RUNTIME_TIMEOUT when a candidate's run
            crashes, exits badly, breaks its protocol or is killed at its timeout (:func:`_check`);
            VERIFY_MISMATCH when the candidate's timed outputs are wrong (``timed_output_mismatch``);
            HARNESS_ERROR for a clock mismatch of a native run.
        AsymmetricTiming: the sides were not invoked alike (a harness fault).
    """
    t0 = time.monotonic()
    rounds = run_rounds(task, runner, candidate, native, scratch, opts, hold, prepare, refs, onnx)
    return finish(_outcome(task, rounds.candidate, rounds.native, opts), rounds, t0)


@dataclass(frozen=True)
class Rounds:
    """The runs of one timing stage, in round order per side (``native`` empty without a native side), each
    side's invocation digest, the cores both sides were pinned to and the conditions read when the node was
    held (governor, frequency, load, device)."""

    candidate: list[mrunner.RunResult]
    native: list[mrunner.RunResult]
    digests: dict[str, str]
    cores: tuple[int, ...]
    conditions: dict[str, object]


def run_rounds(task: Task, runner: Path, candidate: tuple[Path, Side], native: tuple[Path, Side] | None,
               scratch: Path, opts: TimingOptions,
               hold: Callable[[], AbstractContextManager[object]] = nullcontext,
               prepare: Callable[[], AbstractContextManager[object]] = nullcontext,
               refs: References | None = None, onnx: Path | None = None) -> Rounds:
    """The runs of :func:`time_candidate` (started inside ``prepare()``, run inside ``hold()``) and the check of
    the candidate's timed outputs; no statistic.

    Raises:
        as :func:`time_candidate`."""
    seeds = timed_seeds(opts)
    inputs = [make_inputs(task, seed) for seed in seeds]
    plan = _plan(opts.rounds, native is not None)
    cores = opts.run.cpus
    started: list[mrunner.StartedRun] = []
    runs: dict[str, list[mrunner.RunResult]] = {"candidate": [], "native": []}
    try:
        with prepare():
            for who, r in plan:
                model, side = candidate if who == "candidate" else native  # type: ignore[misc]
                started.append(_started(task, runner, model, side, inputs, scratch / f"{who[0]}{r}", opts, who))
        digests = check_symmetric(plan, started, cores)
        with hold():
            conditions = (opts.run.remote.conditions(cores) if opts.run.remote is not None else
                          dict(governor=hostinfo.cpu_governor(cores), freq_mhz=hostinfo.cpu_freq_mhz(cores),
                               load_1m=hostinfo.load_1m()))
            for (who, r), run in zip(plan, started):
                runs[who].append(_go(run, opts, who, r))
    finally:
        for run in started:
            run.cancel()
    check_timed_outputs(task, runs["candidate"], seeds, inputs, opts.run.threads, refs, onnx)
    return Rounds(runs["candidate"], runs["native"], digests, cores, conditions)


def finish(out: TimingOutcome, rounds: Rounds, t0: float) -> TimingOutcome:
    """``out`` with the cores, invocation digests and conditions of ``rounds`` and the stage's seconds since
    ``t0`` (``time.monotonic()``)."""
    return replace(out, cores=rounds.cores, native_invocation_sha256=rounds.digests.get("native", ""),
                   candidate_invocation_sha256=rounds.digests["candidate"], timing_s=time.monotonic() - t0,
                   **rounds.conditions)


def timed_seeds(opts: TimingOptions) -> list[int]:
    """The seeds of the input sets every timing run alternates between."""
    return [opts.seed + TIMED_SEED_OFFSET + j for j in range(min(TIMED_SETS, opts.iterations))]


def samples(runs: list[mrunner.RunResult], basis: str) -> tuple[np.ndarray, np.ndarray]:
    """All samples (ms) of ``runs`` on ``basis`` and the round (run index) of each."""
    vals = [run.op_ms if basis == "op" else run.total_ms for run in runs]
    rounds = [r for r, v in enumerate(vals) for _ in v]
    return np.asarray([x for v in vals for x in v], dtype=np.float64), np.asarray(rounds, dtype=np.int64)


def check_executed(task: Task, candidate: dict[str, int], native: dict[str, int] | None) -> None:
    """Proof that the candidate's kernel ran: every target op type (``task.mnn_op_types``) that the native model
    executes must execute in the candidate's model too (``candidate``, ``native``: op type → ops executed per
    forward, the runner's per-op profile; ``native`` None without a native side: then at least one target type).
    How often is not compared: a geometry that fuses two Rasters into one is an optimization.  A task whose
    targets are ``"*"`` names no op type of its own and is not checked.

    Raises:
        StageFailure: VERIFY_MISMATCH (``not_executed``) naming the missing op types and what ran instead."""
    targets = [t for t in task.mnn_op_types if t != "*"]
    if not targets:
        return
    if native is not None:
        missing = [t for t in targets if native.get(t, 0) > 0 and candidate.get(t, 0) == 0]
    else:
        missing = targets if not any(candidate.get(t, 0) for t in targets) else []
    if missing:
        ran = ", ".join(f"{k} x{v}" for k, v in sorted(candidate.items())) or "nothing"
        native_ran = (f" (the native model runs {', '.join(f'{t} x{native[t]}' for t in missing)})"
                      if native is not None else "")
        raise StageFailure(Status.VERIFY_MISMATCH, ErrorKind.NOT_EXECUTED,
                           f"the task's target op types {missing} did not execute in the candidate's model"
                           f"{native_ran}; it ran {ran} per forward: its kernel did not do the work (routed "
                           "around by its converter or geometry)")


def _outcome(task: Task, cand_runs: list[mrunner.RunResult], nat_runs: list[mrunner.RunResult],
             opts: TimingOptions) -> TimingOutcome:
    """Round medians, speedup and its interval (op basis unless the sides ran different op types), and the
    untimeable and implausible flags.

    Raises:
        StageFailure: TIMING_FAILED when the candidate's op time is zero or invalid."""
    check_executed(task, cand_runs[0].op_types, nat_runs[0].op_types if nat_runs else None)
    basis = "model" if nat_runs and cand_runs[0].op_types != nat_runs[0].op_types else "op"
    cs, cr = samples(cand_runs, basis)
    cmed = sspeedup.round_medians(cs, cr) if cs.size else np.empty(0)
    if cs.size == 0 or not np.all(np.isfinite(cs)) or not np.all(cmed > 0):
        raise StageFailure(
            Status.TIMING_FAILED,
            ErrorKind.INTERNAL,
            f"candidate op time is zero or invalid (target op types {task.mnn_op_types} not executed?): "
            f"op types seen {cand_runs[0].op_types}",
        )
    ns, nr = samples(nat_runs, basis)
    nmed = sspeedup.round_medians(ns, nr) if ns.size else None
    usable = nmed is not None and bool(np.all(nmed > 0)) and bool(np.all(np.isfinite(ns)))
    est = sspeedup.estimate(cmed, nmed if usable else None, opts.confidence)
    out = TimingOutcome(
        candidate_samples_ms=tuple(cs.tolist()), candidate_samples_round=tuple(cr.tolist()),
        candidate_ms=est.candidate_ms, basis=basis, rounds=len(cand_runs), threads=opts.run.threads,
        precision=opts.run.precision,
        # under qemu (this process, or the runner behind an emulator) the numbers are not the target CPU's:
        # recorded, never scored as a speedup
        emulated=bool(opts.run.emulator) or hostinfo.is_emulated())
    if not usable:
        return out
    flags = ()
    if est.speedup is not None and est.speedup > opts.implausible_speedup:
        flags = (Flag(code=IMPLAUSIBLE_SPEEDUP, reason=f"speedup {est.speedup:.3g}x is above "
                      f"timing.implausible_speedup = {opts.implausible_speedup:g}x"),)
    return replace(out, native_samples_ms=tuple(ns.tolist()), native_samples_round=tuple(nr.tolist()),
                   native_ms=est.native_ms, speedup=est.speedup, speedup_ci_low=est.ci_low,
                   speedup_ci_high=est.ci_high, untimeable=est.native_ms < opts.min_native_ms, flags=flags,
                   native_timing="interleaved", native_profile=native_profile(nat_runs))


def native_profile(runs: list[mrunner.RunResult]) -> NativeProfile:
    """The native side of a timing for the baseline table: each run's median on both bases (ms) and the op
    types the native model executed."""
    return NativeProfile(op_round_ms=tuple(float(np.median(r.op_ms)) for r in runs),
                         model_round_ms=tuple(float(np.median(r.total_ms)) for r in runs),
                         op_types=dict(runs[0].op_types))
