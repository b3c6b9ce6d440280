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
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kit.config import EvalConfig
from kit.inputs import make_inputs
from kit.mnn import runner as mrunner
from kit.records import ErrorKind, Status
from kit.stages import StageFailure
from kit.stages.verify import Side, process_failure
from kit.tasks import Task


@dataclass
class TimingResult:
    """Medians in ms, raw samples in ms, speedup and its CI (None without a native side)."""

    candidate_samples_ms: list[float]
    native_samples_ms: list[float] = field(default_factory=list)
    candidate_ms: float | None = None
    native_ms: float | None = None
    speedup: float | None = None
    speedup_ci_low: float | None = None
    speedup_ci_high: float | None = None
    basis: str = "op"


def bootstrap_ci(native: np.ndarray, cand: np.ndarray, n: int, seed: int = 0) -> tuple[float, float]:
    """95 % percentile-bootstrap CI of median(native)/median(cand); ``n`` resamples, seeded."""
    rng = np.random.default_rng(seed)
    nb = np.median(rng.choice(native, size=(n, native.size), replace=True), axis=1)
    cb = np.median(rng.choice(cand, size=(n, cand.size), replace=True), axis=1)
    ratios = nb / cb
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return float(lo), float(hi)


def _started(cfg: EvalConfig, task: Task, runner: Path, model: Path, side: Side, inputs, scratch: Path,
             what: str) -> mrunner.StartedRun:
    """Start one timing run up to the runner's rendezvous (model loaded, inputs read).

    Raises:
        StageFailure: TIMING_FAILED when the runner fails before it (or breaks its protocol).
    """
    with _protocol(what):
        started = mrunner.start_model(
            runner, model, inputs, [o.name for o in task.outputs], side.lib_dir, threads=cfg.timing.threads,
            precision=cfg.timing.precision, warmup=cfg.timing.warmup, iterations=cfg.timing.iterations,
            op_types=tuple(task.mnn_op_types), timeout_s=cfg.timing.timeout_s, scratch=scratch,
            memory_limit_bytes=cfg.verify.memory_limit_mb << 20,
        )
    if isinstance(started, mrunner.RunResult):
        _check(started, what)
        raise StageFailure(Status.TIMING_FAILED, ErrorKind.EXIT_CODE, f"{what} timing run: the runner exited "
                           f"(status 0) before its rendezvous")
    return started


def _go(cfg: EvalConfig, started: mrunner.StartedRun, what: str) -> mrunner.RunResult:
    """Run a started timing run (warm-up and timed iterations) and check its samples.

    Raises:
        StageFailure: TIMING_FAILED for a failed run, a broken protocol or a wrong number of samples.
    """
    with _protocol(what):
        res = started.go()
    _check(res, what)
    if len(res.op_ms) != cfg.timing.iterations:
        raise StageFailure(
            Status.TIMING_FAILED, ErrorKind.INTERNAL, f"{what}: {len(res.op_ms)} samples, expected {cfg.timing.iterations}"
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
        raise StageFailure(Status.TIMING_FAILED, fail.kind, fail.message, **fail.fields)


def time_candidate(
    cfg: EvalConfig,
    task: Task,
    runner: Path,
    candidate: tuple[Path, Side],
    native: tuple[Path, Side] | None,
    scratch: Path,
    hold: Callable[[], AbstractContextManager[object]] = nullcontext,
    prepare: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> TimingResult:
    """Time ``candidate`` (model, side) against ``native`` (or alone when ``native`` is None).

    Every run's runner is started first, inside ``prepare()`` (the node's shared hold: the start-up of a runner
    is work like a build), up to its rendezvous; then, inside ``hold()`` (the node's exclusive timing phase),
    each run in turn does its warm-up and timed iterations.  The inputs are drawn before and the bootstrap CI
    computed after: the node is held exclusively for the measured runs alone.

    Raises:
        StageFailure: TIMING_FAILED when a run fails or yields no usable samples.
    """
    inputs = make_inputs(task, cfg.verify.seed)
    plan = []  # (who, round): order alternates per round, N C, C N, ...
    for r in range(cfg.timing.rounds):
        for who in (["native", "candidate"] if r % 2 == 0 else ["candidate", "native"]):
            if who == "candidate" or native is not None:
                plan.append((who, r))
    started: list[mrunner.StartedRun] = []
    cand_runs, nat_runs = [], []
    try:
        with prepare():
            for who, r in plan:
                model, side = candidate if who == "candidate" else native  # type: ignore[misc]
                started.append(_started(cfg, task, runner, model, side, inputs, scratch / f"{who[0]}{r}", who))
        with hold():
            for (who, _), run in zip(plan, started):
                (cand_runs if who == "candidate" else nat_runs).append(_go(cfg, run, who))
    finally:
        for run in started:
            run.cancel()
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
    out = TimingResult(candidate_samples_ms=cs.tolist(), candidate_ms=float(np.median(cs)), basis=basis)
    if nat_runs:
        ns = samples(nat_runs)
        if ns.size and np.median(ns) > 0:
            out.native_samples_ms = ns.tolist()
            out.native_ms = float(np.median(ns))
            out.speedup = out.native_ms / out.candidate_ms
            out.speedup_ci_low, out.speedup_ci_high = bootstrap_ci(ns, cs, cfg.timing.bootstrap, seed=cfg.verify.seed)
    return out
