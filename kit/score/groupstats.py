"""Group statistics of :mod:`kit.score.metrics`: a group's rates with the bootstrap of their CIs over its tasks, its
geometric-mean speedup, and pass@k per task and per group (definitions: that module's docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from kit.results import rules as scoring


@dataclass(frozen=True)
class Bootstrap:
    """The bootstrap of a group's CIs: ``n`` resamples of its tasks with replacement, seeded with ``seed``."""

    n: int = 1000
    seed: int = 0


def bootstrap(ind: np.ndarray, n_boot: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Percentile 95 % CI of the column means of ``ind`` (tasks × metrics) over task resamples."""
    n = ind.shape[0]
    if n == 0:
        nan = np.full(ind.shape[1], np.nan)
        return nan, nan
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    means = ind[idx].mean(axis=1)  # n_boot × metrics
    return np.percentile(means, 2.5, axis=0), np.percentile(means, 97.5, axis=0)


def with_pass_at_k(pt: pl.DataFrame, ks: Sequence[int]) -> pl.DataFrame:
    """``pt`` with a per-task f64 column ``pass@<k>`` for every k of ``ks``.

    :func:`kit.results.rules.task_pass_at_k` of the task's ``n_samples`` and ``n_correct``: missing samples count
    as failed ones (module docstring).
    """
    for k in ks:
        pt = pt.with_columns(
            pl.struct("n_samples", "n_correct")
            .map_elements(
                lambda s, k=k: scoring.task_pass_at_k(s["n_samples"], s["n_correct"], k),
                return_dtype=pl.Float64,
            )
            .alias(f"pass@{k}")
        )
    return pt


def group_pass_at_k(g: pl.DataFrame, ks: Sequence[int]) -> dict[str, float | int | None]:
    """``pass@<k>`` (mean of the per-task estimates over every task of the group, null for no task) and
    ``pass@<k>_tasks`` (the tasks with at least k samples, where the estimate needs no padding) of one group,
    for every k of ``ks`` (module docstring)."""
    out: dict[str, float | int | None] = {}
    for k in ks:
        out[f"pass@{k}"] = float(g[f"pass@{k}"].mean()) if g.height else None
        out[f"pass@{k}_tasks"] = int((g["n_samples"] >= k).sum())
    return out


def group_rates(g: pl.DataFrame, rate_cols: Sequence[str], n_boot: int, seed: int) -> dict[str, float | None]:
    """``<rate>``, ``<rate>_ci_low``, ``<rate>_ci_high`` for every rate of ``rate_cols`` in one group.

    A rate is the mean of its per-task indicator over the group's tasks (fraction in [0, 1]); the CI is
    :func:`bootstrap` over task resamples (:mod:`kit.score.metrics`' docstring).
    """
    out: dict[str, float | None] = {}
    ind = g.select(rate_cols).cast(pl.Float64).to_numpy()
    lo, hi = bootstrap(ind, n_boot, seed)
    for j, c in enumerate(rate_cols):
        out[c] = float(ind[:, j].mean()) if g.height else None
        out[f"{c}_ci_low"] = float(lo[j])
        out[f"{c}_ci_high"] = float(hi[j])
    return out


def group_geomean(g: pl.DataFrame) -> float | None:
    """``geomean_speedup`` of one group: exp(mean(log speedup)) over its tasks with a scorable best
    speedup, null if none (:mod:`kit.score.metrics`' docstring; its ``per_task`` leaves no-native and emulated tasks null)."""
    sp = g.filter(~pl.col("fast_excluded"))["speedup"].drop_nulls().to_numpy()
    return float(np.exp(np.log(sp).mean())) if sp.size else None
