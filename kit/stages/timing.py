"""Timing: native vs candidate with the same runner, inputs, threads and precision, interleaved in rounds.

Each round runs both sides once (order alternates: N C, C N, N C, ... to cancel order effects); a side's
run is ``warmup`` untimed then ``iterations`` timed forward passes in a fresh runner process.  A sample is
the summed time (ms) of the task's target MNN op types in one forward pass (per-op callbacks).  If the two
sides execute different op-type counts (a candidate that lowers the op differently), both fall back to the
whole-model time (``timing_basis = "model"``), so a candidate cannot win by moving work out of the
measured op types.

``speedup = median(native samples) / median(candidate samples)``; its 95 % CI comes from a bootstrap that
resamples each side's samples independently (percentile method).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kit.config import EvalConfig
from kit.inputs import make_inputs
from kit.records import ErrorKind, Status
from kit.stages import StageFailure
from kit.stages.verify import Side, process_failure, run_checked
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


def _run_side(cfg: EvalConfig, task: Task, runner: Path, model: Path, side: Side, inputs, scratch: Path, what: str):
    try:
        res = run_checked(
            cfg,
            runner,
            model,
            inputs,
            [o.name for o in task.outputs],
            side.lib_dir,
            warmup=cfg.timing.warmup,
        iterations=cfg.timing.iterations,
            op_types=tuple(task.mnn_op_types),
            timeout_s=cfg.timing.timeout_s,
            scratch=scratch,
        )
    except StageFailure as f:
        raise StageFailure(Status.TIMING_FAILED, f.kind, f"{what} timing run: {f.message}") from None
    fail = process_failure(res.proc, f"{what} timing run")
    if fail is not None:
        # the candidate already passed verification: a failure now is a timing failure (flaky crash counts too)
        raise StageFailure(Status.TIMING_FAILED, fail.kind, fail.message, **fail.fields)
    if len(res.op_ms) != cfg.timing.iterations:
        raise StageFailure(
            Status.TIMING_FAILED, ErrorKind.INTERNAL, f"{what}: {len(res.op_ms)} samples, expected {cfg.timing.iterations}"
        )
    return res


def time_candidate(
    cfg: EvalConfig,
    task: Task,
    runner: Path,
    candidate: tuple[Path, Side],
    native: tuple[Path, Side] | None,
    scratch: Path,
) -> TimingResult:
    """Time ``candidate`` (model, side) against ``native`` (or alone when ``native`` is None).

    Raises:
        StageFailure: TIMING_FAILED when a run fails or yields no usable samples.
    """
    inputs = make_inputs(task, cfg.verify.seed)
    cand_runs, nat_runs = [], []
    for r in range(cfg.timing.rounds):
        order = ["native", "candidate"] if r % 2 == 0 else ["candidate", "native"]
        for who in order:
            if who == "native":
                if native is None:
                    continue
                nat_runs.append(_run_side(cfg, task, runner, native[0], native[1], inputs, scratch / f"n{r}", "native"))
            else:
                cand_runs.append(
                    _run_side(cfg, task, runner, candidate[0], candidate[1], inputs, scratch / f"c{r}", "candidate")
                )
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
