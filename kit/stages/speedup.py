"""The speedup of one timing and its interval over rounds (the method is stated in :mod:`kit.stages.timing`).

Pure functions of the per-iteration samples (ms) and their rounds: per round each side's median, then a
paired Student t-interval on the log scale over the rounds:
``d_r = ln(native_r / candidate_r)``, ``speedup = exp(mean d)``,
``exp(mean d +- t_{(1+c)/2, R-1} * sd(d) / sqrt(R))`` (e.g. Rice, *Mathematical Statistics and Data
Analysis*, §11.3: the paired t test and its interval).  Against a baseline table's native rounds (measured in
another timing, so not paired): :func:`unpaired_estimate`, Welch's interval on the logs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Estimate:
    """``native_ms`` / ``candidate_ms``: geometric means (ms) of the rounds' medians (``native_ms`` None
    without a native side); ``speedup = native_ms / candidate_ms``; ``ci_low``/``ci_high`` its interval (None
    with fewer than 2 rounds)."""

    candidate_ms: float
    native_ms: float | None = None
    speedup: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


def round_medians(samples: Sequence[float], rounds: Sequence[int]) -> np.ndarray:
    """The median of the samples of each round, in ascending round order (float64, one per round present).

    Raises:
        ValueError: ``samples`` and ``rounds`` differ in length, or there are no samples."""
    x, r = np.asarray(samples, dtype=np.float64), np.asarray(rounds)
    if x.size != r.size or x.size == 0:
        raise ValueError(f"{x.size} samples with {r.size} round numbers")
    return np.array([np.median(x[r == k]) for k in np.unique(r)])


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom: ``scipy.special.stdtrit``, which
    ``scipy.stats.t.ppf`` calls (the same float), imported here: ``scipy.stats`` cost a timing stage ~0.5-1 s of
    imports (scipy.special alone ~0.2 s), and a correctness-only check's start-up needs neither."""
    from scipy import special  # noqa: PLC0415

    return float(special.stdtrit(df, p))


def geomean(values: np.ndarray) -> float:
    """exp(mean(ln values)) of positive values."""
    return float(np.exp(np.mean(np.log(values))))


def paired_interval(d: np.ndarray, confidence: float) -> tuple[float, float] | None:
    """The ``confidence`` Student t-interval of the mean of ``d`` (None with fewer than 2 values)."""
    n = d.size
    if n < 2:
        return None
    mean, sd = float(np.mean(d)), float(np.std(d, ddof=1))
    half = t_quantile((1 + confidence) / 2, n - 1) * sd / math.sqrt(n)
    return mean - half, mean + half


def estimate(candidate_rounds: np.ndarray, native_rounds: np.ndarray | None, confidence: float = 0.95) -> Estimate:
    """The speedup of medians per round ``native_rounds`` over ``candidate_rounds`` (paired by position: the
    same rounds), with its ``confidence`` interval over rounds.

    Raises:
        ValueError: the two sides have a different number of rounds, or a median is not positive."""
    c = np.asarray(candidate_rounds, dtype=np.float64)
    if c.size == 0 or not np.all(c > 0):
        raise ValueError(f"candidate round medians must be positive, got {c.tolist()}")
    if native_rounds is None:
        return Estimate(candidate_ms=geomean(c))
    n = np.asarray(native_rounds, dtype=np.float64)
    if n.size != c.size or not np.all(n > 0):
        raise ValueError(f"native round medians {n.tolist()} do not pair with the candidate's {c.tolist()}")
    d = np.log(n) - np.log(c)
    ci = paired_interval(d, confidence)
    native_ms, candidate_ms = geomean(n), geomean(c)
    return Estimate(candidate_ms=candidate_ms, native_ms=native_ms, speedup=native_ms / candidate_ms,
                    ci_low=math.exp(ci[0]) if ci else None, ci_high=math.exp(ci[1]) if ci else None)


def welch_interval(a: np.ndarray, b: np.ndarray, confidence: float) -> tuple[float, float] | None:
    """The ``confidence`` interval of mean(a) - mean(b) for two independent samples with unequal variances
    (Welch 1947: Student t with the Welch–Satterthwaite degrees of freedom); None when either has fewer than
    2 values."""
    na, nb = a.size, b.size
    if na < 2 or nb < 2:
        return None
    va, vb = float(np.var(a, ddof=1)) / na, float(np.var(b, ddof=1)) / nb
    diff = float(np.mean(a) - np.mean(b))
    if va + vb == 0:
        return diff, diff
    df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
    half = t_quantile((1 + confidence) / 2, df) * math.sqrt(va + vb)
    return diff - half, diff + half


def unpaired_estimate(candidate_rounds: np.ndarray, native_rounds: np.ndarray, confidence: float = 0.95,
                      between_log_sd: float = 0.0) -> Estimate:
    """The speedup of native round medians measured in another timing (a baseline table's) over this timing's
    candidate round medians: ``speedup = geomean(native) / geomean(candidate)``, its interval Welch's on the
    logs (:func:`welch_interval`: the rounds are not paired, so a drift of the host between the two timings does
    not cancel), widened by the two runs' between-run sd ``between_log_sd`` (tau, ln scale,
    :mod:`kit.score.betweenrun`): half-width ``sqrt(h_welch^2 + 2 (z tau)^2)``, ``z`` the normal quantile of
    ``confidence`` (each side's time moves between runs by tau and the two runs are separate).

    Raises:
        ValueError: a median is not positive, or a side has none."""
    c, n = np.asarray(candidate_rounds, dtype=np.float64), np.asarray(native_rounds, dtype=np.float64)
    if c.size == 0 or n.size == 0 or not np.all(c > 0) or not np.all(n > 0):
        raise ValueError(f"round medians must be positive: native {n.tolist()}, candidate {c.tolist()}")
    ci = welch_interval(np.log(n), np.log(c), confidence)
    if ci is not None and between_log_sd > 0:
        from kit.score.betweenrun import z_of

        mid, half = (ci[0] + ci[1]) / 2, (ci[1] - ci[0]) / 2
        half = math.sqrt(half**2 + 2 * (z_of(confidence) * between_log_sd) ** 2)
        ci = (mid - half, mid + half)
    native_ms, candidate_ms = geomean(n), geomean(c)
    return Estimate(candidate_ms=candidate_ms, native_ms=native_ms, speedup=native_ms / candidate_ms,
                    ci_low=math.exp(ci[0]) if ci else None, ci_high=math.exp(ci[1]) if ci else None)
