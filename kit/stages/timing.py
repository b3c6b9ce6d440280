"""Timing: native vs candidate with the same runner, inputs, threads and precision, interleaved in rounds.

Each round runs both sides once (order alternates: N C, C N, N C, ... to cancel order effects); a side's
run is ``warmup`` untimed then ``iterations`` timed forward passes in a fresh runner process, started (model
loaded, inputs read) before the node's exclusive timing phase and let go inside it.  A sample is
the summed time (ms) of the task's target MNN op types in one forward pass (per-op callbacks).  If the two
sides execute different op-type counts (a candidate that lowers the op differently), both fall back to the
whole-model time (``timing_basis = "model"``), so a candidate cannot win by moving work out of the
measured op types.

``speedup = median(native samples) / median(candidate samples)``; its 95 % CI comes from a bootstrap that
resamples each side's samples independently (percentile method).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from kit.hostinfo import is_emulated
from kit.inputs import make_inputs
from kit.mnn import runner as mrunner
from kit.outcomes import StageFailure, TimingOutcome
from kit.records import ErrorKind, Status
from kit.stages.verify import Side, process_failure
from kit.tasks import Task


@dataclass(frozen=True)
class TimingOptions:
    """``rounds`` interleaved rounds of ``warmup`` untimed and ``iterations`` timed forward passes per side,
    each run within ``timeout_s`` seconds (each half); ``bootstrap`` resamples for the CI; ``seed`` draws the
    inputs and seeds the bootstrap; ``run``: threads, precision and memory limit of the runner (the same as
    verification's)."""

    warmup: int = 10
    iterations: int = 100
    rounds: int = 3
    bootstrap: int = 1000
    timeout_s: float = 300.0
    seed: int = 0
    run: mrunner.RunSettings = mrunner.RunSettings()

    def settings(self, task: Task) -> mrunner.RunSettings:
        """The runner settings of one timing run of ``task``: the same for both sides."""
        return replace(self.run, warmup=self.warmup, iterations=self.iterations,
                       op_types=tuple(task.mnn_op_types), timeout_s=self.timeout_s)


def bootstrap_ci(native: np.ndarray, cand: np.ndarray, n: int, seed: int = 0) -> tuple[float, float]:
    """95 % percentile-bootstrap CI of median(native)/median(cand); ``n`` resamples, seeded."""
    rng = np.random.default_rng(seed)
    nb = np.median(rng.choice(native, size=(n, native.size), replace=True), axis=1)
    cb = np.median(rng.choice(cand, size=(n, cand.size), replace=True), axis=1)
    ratios = nb / cb
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return float(lo), float(hi)


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
    each run in turn does its warm-up and timed iterations.  The inputs are drawn before and the bootstrap CI
    computed after: the node is held exclusively for the measured runs alone.

    Raises:
        StageFailure: TIMING_FAILED when a run fails or yields no usable samples.
    """
    inputs = make_inputs(task, opts.seed)
    plan = _plan(opts.rounds, native is not None)
    started: list[mrunner.StartedRun] = []
    cand_runs, nat_runs = [], []
    try:
        with prepare():
            for who, r in plan:
                model, side = candidate if who == "candidate" else native  # type: ignore[misc]
                started.append(_started(task, runner, model, side, inputs, scratch / f"{who[0]}{r}", opts, who))
        with hold():
            for (who, _), run in zip(plan, started):
                (cand_runs if who == "candidate" else nat_runs).append(_go(run, opts, who))
    finally:
        for run in started:
            run.cancel()
    return _outcome(task, cand_runs, nat_runs, opts)


def _outcome(task: Task, cand_runs: list[mrunner.RunResult], nat_runs: list[mrunner.RunResult],
             opts: TimingOptions) -> TimingOutcome:
    """Medians, speedup and CI from the runs' samples (op basis unless the sides ran different op types).

    Raises:
        StageFailure: TIMING_FAILED when the candidate's op time is zero or invalid."""
    basis = "op"
    if nat_runs and cand_runs[0].op_types != nat_runs[0].op_types:
        basis = "model"

    def samples(runs) -> np.ndarray:
        vals = [v for run in runs for v in (run.op_ms if basis == "op" else run.total_ms)]
        return np.asarray(vals, dtype=np.float64)

    cs = samples(cand_runs)
    if cs.size == 0 or not np.all(np.isfinite(cs)) or np.median(cs) <= 0:
        raise StageFailure(
            Status.TIMING_FAILED,
            ErrorKind.INTERNAL,
            f"candidate op time is zero or invalid (target op types {task.mnn_op_types} not executed?): "
            f"op types seen {cand_runs[0].op_types}",
        )
    out = TimingOutcome(candidate_samples_ms=tuple(cs.tolist()), candidate_ms=float(np.median(cs)), basis=basis,
                        threads=opts.run.threads, precision=opts.run.precision,
                        # under qemu the numbers are not the target CPU's: recorded, never scored as a speedup
                        emulated=is_emulated())
    ns = samples(nat_runs) if nat_runs else np.empty(0)
    if ns.size and np.median(ns) > 0:
        native_ms = float(np.median(ns))
        lo, hi = bootstrap_ci(ns, cs, opts.bootstrap, seed=opts.seed)
        out = replace(out, native_samples_ms=tuple(ns.tolist()), native_ms=native_ms,
                      speedup=native_ms / out.candidate_ms, speedup_ci_low=lo, speedup_ci_high=hi)
    return out
