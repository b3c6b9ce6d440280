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
cores; otherwise the timing is a harness error, not the candidate's.
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
from kit.outcomes import StageFailure, TimingOutcome
from kit.records import IMPLAUSIBLE_SPEEDUP, ErrorKind, Flag, Status
from kit.stages import speedup as sspeedup
from kit.stages.verify import Side, process_failure
from kit.tasks import Task


class AsymmetricTiming(Exception):
    """The two sides of a timing did not run alike (other runner settings, other cores): a fault of the kit,
    never the candidate's (the pipeline records a ``harness_error``)."""


@dataclass(frozen=True)
class TimingOptions:
    """``rounds`` interleaved rounds of ``warmup`` untimed and ``iterations`` timed forward passes per side,
    each run within ``timeout_s`` seconds (each half); ``confidence`` of the speedup's interval; ``seed``
    draws the inputs; ``run``: threads, precision, memory limit and cores of the runner (the same as
    verification's, plus the cores); ``min_native_ms``: a native op time below it is untimeable;
    ``implausible_speedup``: a speedup above it is flagged."""

    warmup: int = 10
    iterations: int = 30
    rounds: int = 10
    confidence: float = 0.95
    timeout_s: float = 300.0
    seed: int = 0
    run: mrunner.RunSettings = mrunner.RunSettings()
    min_native_ms: float = 0.0
    implausible_speedup: float = 10.0

    def settings(self, task: Task) -> mrunner.RunSettings:
        """The runner settings of one timing run of ``task``: the same for both sides."""
        return replace(self.run, warmup=self.warmup, iterations=self.iterations,
                       op_types=tuple(task.mnn_op_types), timeout_s=self.timeout_s)


def _started(task: Task, runner: Path, model: Path, side: Side, inputs, scratch: Path, opts: TimingOptions,
             what: str) -> mrunner.StartedRun:
    """Start one timing run up to the runner's rendezvous (model loaded, inputs read).

    Raises:
        StageFailure: TIMING_FAILED when the runner fails before it (or breaks its protocol).
    """
    with _protocol(what):
        started = mrunner.start_model(runner, model, inputs, [o.name for o in task.outputs], side.lib_dir,
                                      opts.settings(task), scratch=scratch)
    if isinstance(started, mrunner.RunResult):
        _check(started, what)
        raise StageFailure(Status.TIMING_FAILED, ErrorKind.EXIT_CODE, f"{what} timing run: the runner exited "
                           f"(status 0) before its rendezvous")
    return started


def _go(started: mrunner.StartedRun, opts: TimingOptions, what: str) -> mrunner.RunResult:
    """Run a started timing run (warm-up and timed iterations) and check its samples.

    Raises:
        StageFailure: TIMING_FAILED for a failed run, a broken protocol or a wrong number of samples.
    """
    with _protocol(what):
        res = started.go()
    _check(res, what)
    if len(res.op_ms) != opts.iterations:
        raise StageFailure(
            Status.TIMING_FAILED, ErrorKind.INTERNAL, f"{what}: {len(res.op_ms)} samples, expected {opts.iterations}"
        )
    return res


@contextmanager
def _protocol(what: str) -> Iterator[None]:
    """A runner that breaks its protocol during timing: TIMING_FAILED (EXIT_CODE)."""
    try:
        yield
    except mrunner.RunnerProtocolError as exc:
        raise StageFailure(Status.TIMING_FAILED, ErrorKind.EXIT_CODE, f"{what} timing run: runner broke its "
                           f"protocol: {exc}") from None


def _check(res: mrunner.RunResult, what: str) -> None:
    fail = process_failure(res.proc, f"{what} timing run")
    if fail is not None:
        # the candidate already passed verification: a failure now is a timing failure (flaky crash counts too)
        raise StageFailure(Status.TIMING_FAILED, fail.kind, fail.message, signal=fail.signal)


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
        allowed = hostinfo.allowed_cores(run.waiting.pid) if cores else None
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
) -> TimingOutcome:
    """Time ``candidate`` (model, side) against ``native`` (or alone when ``native`` is None).

    Every run's runner is started first, inside ``prepare()`` (the node's shared hold: the start-up of a runner
    is work like a build), up to its rendezvous; then, inside ``hold()`` (the node's exclusive timing phase),
    the conditions are read (governor, frequency, load) and each run in turn does its warm-up and timed
    iterations.  The inputs are drawn before and the statistics computed after: the node is held exclusively
    for the measured runs alone.

    Raises:
        StageFailure: TIMING_FAILED when a run fails or yields no usable samples.
        AsymmetricTiming: the sides were not invoked alike (a harness fault).
    """
    t0 = time.monotonic()
    inputs = make_inputs(task, opts.seed)
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
            conditions = dict(governor=hostinfo.cpu_governor(cores), freq_mhz=hostinfo.cpu_freq_mhz(cores),
                              load_1m=hostinfo.load_1m())
            for (who, _), run in zip(plan, started):
                runs[who].append(_go(run, opts, who))
    finally:
        for run in started:
            run.cancel()
    out = _outcome(task, runs["candidate"], runs["native"], opts)
    return replace(out, cores=cores, native_invocation_sha256=digests.get("native", ""),
                   candidate_invocation_sha256=digests["candidate"], timing_s=time.monotonic() - t0, **conditions)


def _samples(runs: list[mrunner.RunResult], basis: str) -> tuple[np.ndarray, np.ndarray]:
    """All samples (ms) of ``runs`` on ``basis`` and the round (run index) of each."""
    vals = [run.op_ms if basis == "op" else run.total_ms for run in runs]
    rounds = [r for r, v in enumerate(vals) for _ in v]
    return np.asarray([x for v in vals for x in v], dtype=np.float64), np.asarray(rounds, dtype=np.int64)


def _outcome(task: Task, cand_runs: list[mrunner.RunResult], nat_runs: list[mrunner.RunResult],
             opts: TimingOptions) -> TimingOutcome:
    """Round medians, speedup and its interval (op basis unless the sides ran different op types), and the
    untimeable and implausible flags.

    Raises:
        StageFailure: TIMING_FAILED when the candidate's op time is zero or invalid."""
    basis = "model" if nat_runs and cand_runs[0].op_types != nat_runs[0].op_types else "op"
    cs, cr = _samples(cand_runs, basis)
    cmed = sspeedup.round_medians(cs, cr) if cs.size else np.empty(0)
    if cs.size == 0 or not np.all(np.isfinite(cs)) or not np.all(cmed > 0):
        raise StageFailure(
            Status.TIMING_FAILED,
            ErrorKind.INTERNAL,
            f"candidate op time is zero or invalid (target op types {task.mnn_op_types} not executed?): "
            f"op types seen {cand_runs[0].op_types}",
        )
    ns, nr = _samples(nat_runs, basis)
    nmed = sspeedup.round_medians(ns, nr) if ns.size else None
    usable = nmed is not None and bool(np.all(nmed > 0)) and bool(np.all(np.isfinite(ns)))
    est = sspeedup.estimate(cmed, nmed if usable else None, opts.confidence)
    out = TimingOutcome(
        candidate_samples_ms=tuple(cs.tolist()), candidate_samples_round=tuple(cr.tolist()),
        candidate_ms=est.candidate_ms, basis=basis, rounds=len(cand_runs), threads=opts.run.threads,
        precision=opts.run.precision,
        # under qemu the numbers are not the target CPU's: recorded, never scored as a speedup
        emulated=hostinfo.is_emulated())
    if not usable:
        return out
    flags = ()
    if est.speedup is not None and est.speedup > opts.implausible_speedup:
        flags = (Flag(code=IMPLAUSIBLE_SPEEDUP, reason=f"speedup {est.speedup:.3g}x is above "
                      f"timing.implausible_speedup = {opts.implausible_speedup:g}x"),)
    return replace(out, native_samples_ms=tuple(ns.tolist()), native_samples_round=tuple(nr.tolist()),
                   native_ms=est.native_ms, speedup=est.speedup, speedup_ci_low=est.ci_low,
                   speedup_ci_high=est.ci_high, untimeable=est.native_ms < opts.min_native_ms, flags=flags)
