"""A bundle's ``metrics.json``: :func:`kit.score.metrics.summary` per method, computed one way by ``mkb bundle`` and
again by ``mkb validate`` (the same call on the same records, so a stored figure that differs was edited).

The denominator is what ``mkb report`` scores the run over (:func:`kit.report.data.run_tasks`: the task
selection of every session in ``provenance.json``), the noise figures those of the run's ``calibration.json``
(:func:`kit.report.data.load_calibration`), the thresholds the config's ``report.fast_p``.  The bootstrap CIs
are seeded (:data:`N_BOOT` resamples, :data:`SEED`), so they are reproduced too.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import polars as pl

from kit.report.data import load_calibration, run_tasks
from kit.score import metrics

N_BOOT = 1000
SEED = 0
#: relative tolerance of a recomputed figure (the same code on the same records gives the same float; the margin
#: only absorbs a summation order that Polars may change between versions)
REL_TOL = 1e-9


def denominator(root: Path, records: pl.DataFrame, suite: pl.DataFrame) -> pl.DataFrame:
    """The tasks (``task_id``, ``category``, ``split``) the run in ``root`` (a run directory, or a bundle's
    root: both hold ``provenance.json``) is scored over, out of the task table ``suite``.

    Raises:
        kit.report.ReportError: the selection names tasks ``suite`` lacks, or none is left."""
    return run_tasks(root, records, suite)[0]


def noise_of(root: Path, records: pl.DataFrame) -> dict[str, float] | None:
    """Task id -> ``noise_log`` from ``root/calibration.json`` (None without figures).

    Raises:
        kit.report.ReportError: the calibration file is malformed."""
    cal = load_calibration(root, records)
    return (cal or {}).get("noise") or None


def compute(records: pl.DataFrame, tasks: pl.DataFrame, noise: dict[str, float] | None,
            ps: list[float]) -> list[dict[str, Any]]:
    """One JSON-able row per method: every column of :func:`kit.score.metrics.summary` (rates as fractions in
    [0, 1], counts, CIs, ``geomean_speedup``, task lists); NaN written as null."""
    df = metrics.summary(records, tasks, ps=ps, by=("method",), boot=metrics.Bootstrap(N_BOOT, SEED), noise=noise)
    return [{k: _plain(v) for k, v in row.items()} for row in df.iter_rows(named=True)]


def _plain(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def differences(stored: Any, recomputed: list[dict[str, Any]]) -> list[str]:
    """Each way ``stored`` (``metrics.json``'s content) differs from ``recomputed``, named as
    ``metrics.json: method 'sample': fcr is 0.75, recomputed from the records 1.0``."""
    if not isinstance(stored, list) or not all(isinstance(r, dict) and "method" in r for r in stored):
        return ["metrics.json: expected a list of objects with a 'method' (one per method)"]
    have = {str(r["method"]): r for r in stored}
    want = {str(r["method"]): r for r in recomputed}
    out = [f"metrics.json: method {m!r} is stored but has no records" for m in sorted(set(have) - set(want))]
    out += [f"metrics.json: method {m!r} has records but no stored metrics" for m in sorted(set(want) - set(have))]
    for m in sorted(set(have) & set(want)):
        for key in sorted(set(have[m]) | set(want[m])):
            a, b = have[m].get(key, "(absent)"), want[m].get(key, "(absent)")
            if not _same(a, b):
                out.append(f"metrics.json: method {m!r}: {key} is {a!r}, recomputed from the records {b!r}")
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-12)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b
