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
(Student t over the R rounds; a paired t-interval on the log scale) with the fixed protocol; adaptive, the rounds
run in batches and stop at the first look whose repeated confidence interval (the same mean, a wider quantile:
:mod:`kit.stages.sequential`) decides the fast_p thresholds or is narrow (:func:`adaptive_rule`).  The runs of both sides must have the
same invocation digest (:meth:`kit.mnn.runcall.RunnerCall.invocation_sha256`), and run on exactly the timing
cores; otherwise the timing is a harness error, not the candidate's.  With a remote runner (``run.remote``: an adb
device, :mod:`kit.devices`) the runs and the conditions (governor, frequency, load, the device's state) are the
device's.

Against a candidate that games the timing (the runner loads the candidate's library, so code of the candidate
runs inside the measuring process): every run's first timed forwards run on :data:`TIMED_SETS` input sets (seeds
``seed + TIMED_SEED_OFFSET + j``, the same on both sides), every other forward on fresh inputs the runner
derives from them (no input repeats, so a cache keyed on the input's content never hits); a timed forward that
left a float output unwritten is runner exit 6; the first outputs on each set and ``checked_forwards`` forwards
per run on fresh inputs, picked by the runner at random after each forward, are compared with ONNX Runtime (the
task's tolerance) for the candidate's runs, and the inputs of the latter must be drawable from the timed sets
(:mod:`kit.stages.timedcheck`: ``timed_output_mismatch``, ``inputs_forged``, a ``verify_mismatch``); the runner
leaves by exit_group right after writing its results (no destructor of the candidate's runs after them); and the
runner's clock is checked against the kit's and its times against each other
(:func:`kit.stages.timingrun.check_clock`: ``clock_mismatch``, the candidate's a ``runtime_crash``).  The timed
outputs are compared before any failure of the runs is raised.  None of these is ever a speedup.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from kit.host import machine as hostinfo
from kit.mnn import runner as mrunner
from kit.results.outcomes import NativeProfile, StageFailure, TimingOutcome
from kit.results.records import IMPLAUSIBLE_SPEEDUP, ErrorKind, Flag, Status
from kit.stages import accounting, runplan, sequential
from kit.stages import speedup as sspeedup
from kit.stages.timedcheck import check_timed_outputs
from kit.stages.timingrun import AsymmetricTiming, check_symmetric, go_run, start_run
from kit.stages.verify import References, SideModel
from kit.suite.inputs import make_inputs
from kit.suite.tasks import Task

#: input sets a timing run alternates between (fewer when ``iterations`` is smaller)
TIMED_SETS = 2
#: their seeds are ``seed + TIMED_SEED_OFFSET + j``: other inputs than verification's (``seed + k``)
TIMED_SEED_OFFSET = 500


@dataclass(frozen=True)
class TimingOptions:
    """Up to ``rounds`` interleaved rounds of ``warmup`` untimed and ``iterations`` timed forward passes per side,
    each run within ``timeout_s`` seconds (each half); adaptive (:mod:`kit.stages.runplan`,
    :mod:`kit.stages.sequential`) when ``rounds_min`` is below ``rounds``: looks after ``rounds_min`` rounds and
    every ``rounds_step`` more, stopping once the interval decides every threshold of ``thresholds`` (fast_p's p)
    or is narrower than ``stop_width`` (relative to the speedup); ``rounds_min`` None: fixed, ``rounds`` rounds.
    ``confidence`` of the speedup's interval; ``seed`` draws the inputs; ``run``: threads, precision, memory limit
    and cores of the runner (the same as verification's, plus the cores); ``min_native_ms``: a native op time
    below it is untimeable; ``implausible_speedup``: a speedup above it is flagged; ``checked_forwards``: timed
    forwards on fresh inputs per run that the runner picks at random and the kit compares with ONNX Runtime."""

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
    rounds_min: int | None = None
    rounds_step: int = 4
    stop_width: float = 0.05
    thresholds: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0)

    def settings(self, task: Task) -> mrunner.RunSettings:
        """The runner settings of one timing run of ``task``: the same for both sides."""
        return replace(self.run, warmup=self.warmup, iterations=self.iterations,
                       op_types=tuple(task.mnn_op_types), timeout_s=self.timeout_s, checked=self.checked_forwards)

    def looks(self) -> tuple[int, ...]:
        """The rounds run by each look (:func:`kit.stages.runplan.looks`; ``(rounds,)``: the fixed protocol)."""
        first = self.rounds if self.rounds_min is None else min(self.rounds_min, self.rounds)
        return runplan.looks(first, self.rounds_step, self.rounds)


@dataclass(frozen=True)
class TimingSetup:
    """Where one timing stage runs its runs, and what stands in for the task's files where they are not there.

    ``runner``: the kit's runner (a path) that runs a side without a runner of its own (the native build's);
    ``scratch``: a directory of the stage's own (each run gets a folder in it);
    ``hold``: a context manager factory entered around the measured runs (the node's exclusive timing phase,
    or an adb device's; default: none);
    ``prepare``: one entered around the runners' start-up (the node's shared hold: a runner's start-up is work
    like a build; default: none);
    ``turn``: one entered around all of the stage's batches (the node's turn to time: another stage's batches
    do not come in between; default: none);
    ``refs``: ONNX Runtime's outputs by seed computed elsewhere (:data:`kit.stages.verify.References`; a seed
    missing is computed here; None: all are);
    ``onnx``: the task's ONNX model for the references of the forwards the runner checked at random (None:
    ``task.onnx_path``; a timing node gets it shipped)."""

    runner: Path
    scratch: Path
    hold: Callable[[], AbstractContextManager[object]] = nullcontext
    prepare: Callable[[], AbstractContextManager[object]] = nullcontext
    refs: References | None = None
    onnx: Path | None = None
    turn: Callable[[], AbstractContextManager[object]] = nullcontext


def time_candidate(task: Task, candidate: SideModel, native: SideModel | None, opts: TimingOptions,
                   setup: TimingSetup) -> TimingOutcome:
    """Time ``candidate`` against ``native`` (or alone when ``native`` is None), as ``opts`` says, where ``setup``
    says (:class:`TimingSetup`).

    Every run's runner is started first, inside ``setup.prepare()`` (the node's shared hold: the start-up of a
    runner is work like a build), up to its rendezvous; then, inside ``setup.hold()`` (the node's exclusive
    timing phase), the conditions are read (governor, frequency, load) and each run in turn does its warm-up and
    timed iterations.  The inputs are drawn before and the statistics computed after, and so are the candidate's
    timed outputs compared with ONNX Runtime (``setup.refs``: references computed elsewhere, by seed): the node
    is held exclusively for the measured runs alone.  ``setup.onnx``: the task's ONNX model for the references
    of the forwards the runner checked at random (default ``task.onnx_path``; a timing node gets it shipped).

    Returns the samples (ms), the speedup and its interval, the conditions and the stage's seconds
    (:class:`kit.results.outcomes.TimingOutcome`).

    Raises:
        StageFailure: VERIFY_MISMATCH when the candidate's timed outputs are wrong (``timed_output_mismatch``) or
            a checked forward's inputs were not drawn from the timed sets (``inputs_forged``), checked before any
            other failure of the runs; TIMING_FAILED when a native run fails or the candidate's op time is
            invalid; RUNTIME_CRASH / RUNTIME_TIMEOUT when a candidate's run crashes, exits badly, breaks its
            protocol, is killed at its timeout (:func:`kit.stages.timingrun.check_run`) or its stamp stream or
            clock cannot be trusted (``clock_mismatch``); HARNESS_ERROR for a clock mismatch of a native run;
            TIMING_FAILED (``unaccounted_work``) for work outside the candidate's timed intervals
            (:func:`kit.stages.accounting.check`).
        AsymmetricTiming: the sides were not invoked alike (a harness fault).
    """
    t0 = time.monotonic()
    # without a native side no interval is asked for: the candidate's time alone, at the first look's rounds
    decide = adaptive_rule(opts) if native is not None else (lambda _c, _n: sequential.STOP_ALONE)
    rounds = run_rounds(task, candidate, native, opts, setup, decide)
    out = _outcome(task, rounds.candidate, rounds.native, opts)
    accounting.check(rounds.candidate, rounds.native, out.basis, opts.warmup, opts.confidence)
    return finish(out, rounds, t0)


@dataclass(frozen=True)
class Rounds:
    """The runs of one timing stage, in round order per side (``native`` empty without a native side), each
    side's invocation digest, the cores both sides were pinned to, the conditions read when the node was
    first held (governor, frequency, load, device) and why the rounds stopped (:data:`kit.stages.sequential.STOP_MAX`
    etc.)."""

    candidate: list[mrunner.RunResult]
    native: list[mrunner.RunResult]
    digests: dict[str, str]
    cores: tuple[int, ...]
    conditions: dict[str, object]
    stop: str = sequential.STOP_MAX


#: a stopping rule: the runs so far (candidate's, native's) → why the timing may stop now, or None
Decide = Callable[[list[mrunner.RunResult], list[mrunner.RunResult]], "str | None"]


def run_rounds(task: Task, candidate: SideModel, native: SideModel | None, opts: TimingOptions,
               setup: TimingSetup, decide: Decide | None = None) -> Rounds:
    """The runs of :func:`time_candidate` and the check of the candidate's timed outputs; no statistic.  The
    rounds run in the batches of :meth:`TimingOptions.looks` (:func:`kit.stages.runplan.batches`), all of them
    inside ``setup.turn()``, each batch's runners started inside ``setup.prepare()`` and run inside
    ``setup.hold()``; after each batch but the last, ``decide`` (None: never) may stop them.  The runs stop at
    the first that fails (:func:`kit.stages.timingrun.go_run`), and the timed outputs of the candidate's runs
    so far are compared before that failure is raised.

    Raises:
        as :func:`time_candidate`; AsymmetricTiming also when a batch's runs were invoked otherwise than an
        earlier batch's."""
    seeds = timed_seeds(opts)
    inputs = [make_inputs(task, seed) for seed in seeds]
    # written once for every run of both sides: each runner sees them read-only (its sandbox's ro bind)
    state = _Batches(task, candidate, native, opts, setup, mrunner.write_inputs(inputs, setup.scratch / "in"))
    runs = state.runs
    failure: StageFailure | None = None
    stop = sequential.STOP_MAX
    plan = opts.looks()
    with setup.turn():
        for batch in runplan.batches(plan):
            failure = _run_batch(state, runplan.run_order(batch, native is not None))
            if failure is not None:
                break
            reason = decide(runs["candidate"], runs["native"]) if decide is not None and batch.stop < plan[-1] else None
            if reason is not None:
                stop = reason
                break
    # the candidate's timed outputs first, of every run that wrote them (the failed one's too): a kernel wrong
    # whenever it is timed is wrong, whatever else failed (a stamp line it forged, stderr it flooded, a native run)
    check_timed_outputs(task, [run for run in runs["candidate"] if run.ok], seeds, inputs, opts.run.threads,
                        setup.refs, setup.onnx)
    if failure is not None:
        raise failure
    return Rounds(runs["candidate"], runs["native"], state.digests, opts.run.cpus, state.conditions, stop)


@dataclass
class _Batches:
    """What the batches of one timing share: its sides, options, place and input sets (written once, in
    ``setup.scratch/in``), and what they gathered so far: the runs per side, each side's invocation digest, the
    conditions read at the first hold."""

    task: Task
    candidate: SideModel
    native: SideModel | None
    opts: TimingOptions
    setup: TimingSetup
    inputs: mrunner.WrittenInputs
    runs: dict[str, list[mrunner.RunResult]] = field(default_factory=lambda: {"candidate": [], "native": []})
    digests: dict[str, str] = field(default_factory=dict)
    conditions: dict[str, object] = field(default_factory=dict)


def _run_batch(state: _Batches, order: list[tuple[str, int]]) -> StageFailure | None:
    """Start the runs of ``order`` (inside ``setup.prepare()``), check them symmetric (and invoked as the earlier
    batches', whose digests ``state`` keeps), run them inside ``setup.hold()`` (reading the conditions on the
    first batch) and add the results to ``state.runs``; returns why the first run that failed does not count
    (None: all count).

    Raises:
        AsymmetricTiming: as :func:`check_symmetric`, or the digests differ from the earlier batches'."""
    task, candidate, native, opts, setup = state.task, state.candidate, state.native, state.opts, state.setup
    inputs, runs, digests, conditions = state.inputs, state.runs, state.digests, state.conditions
    cores = opts.run.cpus
    started: list[mrunner.StartedRun] = []
    try:
        with setup.prepare():
            for who, r in order:
                timed = candidate if who == "candidate" else native
                assert timed is not None  # the order has native runs only with a native side
                started.append(start_run(task, setup.runner, timed, inputs, setup.scratch / f"{who[0]}{r}",
                                         opts.settings(task), who))
        now = check_symmetric(order, started, cores)
        if digests and now != digests:
            raise AsymmetricTiming(f"a later batch of timing runs was invoked differently ({now} vs {digests})")
        digests.update(now)
        with setup.hold():
            if not conditions:
                conditions.update(opts.run.remote.conditions(cores) if opts.run.remote is not None else
                                  dict(governor=hostinfo.cpu_governor(cores), freq_mhz=hostinfo.cpu_freq_mhz(cores),
                                       load_1m=hostinfo.load_1m()))
            for (who, r), run in zip(order, started):
                ran = go_run(run, opts.iterations, who, r)
                if ran.result is not None:
                    runs[who].append(ran.result)
                if ran.failure is not None:
                    return ran.failure
    finally:
        for run in started:
            run.cancel()
    return None


def adaptive_rule(opts: TimingOptions) -> Decide:
    """The stopping rule of an adaptive timing with a native side: the speedup's repeated confidence interval
    at this look (:func:`kit.stages.sequential.rci` over the rounds' paired log ratios, on the basis
    :func:`_outcome` would use) and :func:`kit.stages.sequential.stop_reason` on it; None (go on) where a round's
    median is not a positive number (the final statistic then says why)."""
    plan = opts.looks()

    def decide(cand: list[mrunner.RunResult], nat: list[mrunner.RunResult]) -> str | None:
        basis = "model" if cand[0].op_types != nat[0].op_types else "op"
        (cs, cr), (ns, nr) = samples(cand, basis), samples(nat, basis)
        if len(cand) != len(nat) or len(cand) not in plan or not (np.all(np.isfinite(cs)) and np.all(np.isfinite(ns))):
            return None
        cmed, nmed = sspeedup.round_medians(cs, cr), sspeedup.round_medians(ns, nr)
        if not (np.all(cmed > 0) and np.all(nmed > 0)):
            return None
        d = np.log(nmed) - np.log(cmed)
        lo, hi = sequential.rci(d, plan, opts.confidence)
        return sequential.stop_reason((math.exp(lo), math.exp(hi)), math.exp(float(np.mean(d))), opts.thresholds,
                                      opts.stop_width)

    return decide


def finish(out: TimingOutcome, rounds: Rounds, t0: float) -> TimingOutcome:
    """``out`` with the cores, invocation digests and conditions of ``rounds`` and the stage's seconds since
    ``t0`` (``time.monotonic()``)."""
    return replace(out, cores=rounds.cores, native_invocation_sha256=rounds.digests.get("native", ""), stop=rounds.stop,
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
    if usable and len(opts.looks()) > 1:  # adaptive: the repeated confidence interval at the look it stopped at
        lo, hi = sequential.rci(np.log(nmed) - np.log(cmed), opts.looks(), opts.confidence)
        est = replace(est, ci_low=math.exp(lo), ci_high=math.exp(hi))
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
