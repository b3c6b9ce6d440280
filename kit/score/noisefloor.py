"""The A/A calibration's figures (``calibration.json``): per task the noise floor, over the tasks the coverage of
the timing method's intervals.  Pure functions of records (dicts) and of calibration rows, used by
``mkb calibrate`` (:mod:`kit.outline.calibrate`, which states the method) and by the report.

``noise_log = ln(ci_high / ci_low) / 2``: the half-width of a task's A/A interval on the log scale; a
candidate's speedup ``s`` is inside the noise band of its task when ``|ln s| <= noise_log``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kit.results.records import Status


def task_row(r: dict[str, Any]) -> dict[str, Any]:
    """One task's calibration entry from its record: status, A/A speedup and interval, ``covers_one`` (the
    interval contains 1.0), ``noise_log`` (half its width on the log scale), ``untimeable``, the timing's
    ``rounds`` and why they stopped (``stop``: "" in records before adaptive rounds)."""
    lo, hi = r["speedup_ci_low"], r["speedup_ci_high"]
    has_ci = lo is not None and hi is not None and lo > 0 and hi > 0
    return {
        "task_id": r["task_id"],
        "native_passes": r["status"] in (Status.OK.value, Status.TIMING_FAILED.value),
        "status": r["status"],
        "error_kind": r["error_kind"],
        "speedup": r["speedup"],
        "speedup_ci_low": lo,
        "speedup_ci_high": hi,
        "covers_one": bool(lo <= 1.0 <= hi) if has_ci else None,
        "noise_log": math.log(hi / lo) / 2 if has_ci else None,
        "native_ms": r["native_ms"],
        "untimeable": bool(r.get("timing_untimeable")),
        "rounds": r.get("timing_rounds"),
        "stop": r.get("timing_stop") or "",
    }


def summarize(rows: list[dict[str, Any]], confidence: float = 0.95) -> dict[str, Any]:
    """The calibration's summary over the tasks with an A/A interval (``timed``): ``coverage`` (share whose
    interval contains 1.0) at ``confidence``, the median and 95th percentile of the interval width
    ``ci_high - ci_low``, the median ``noise_log``, the share of tasks native would score for ``fast_1.0``
    (speedup > 1) and its significant variant (interval above 1), the untimeable tasks, the median and
    5th/95th percentiles of the A/A speedups, the median number of rounds the timed tasks ran
    (``rounds_median``) and how many stopped for each reason (``stops``: :mod:`kit.stages.sequential`)."""
    speeds = np.array([r["speedup"] for r in rows if r["speedup"] is not None], dtype=float)
    timed = [r for r in rows if r["covers_one"] is not None]
    widths = np.array([r["speedup_ci_high"] - r["speedup_ci_low"] for r in timed], dtype=float)

    def share(pred) -> float | None:
        return sum(1 for r in timed if pred(r)) / len(timed) if timed else None

    def pct(values: np.ndarray, q: float) -> float | None:
        return float(np.percentile(values, q)) if values.size else None

    return {
        "tasks": len(rows),
        "native_passes": sum(r["native_passes"] for r in rows),
        "timed": len(timed),
        "confidence": confidence,
        "coverage": share(lambda r: r["covers_one"]),
        "ci_width_median": pct(widths, 50),
        "ci_width_p95": pct(widths, 95),
        "noise_log_median": pct(np.array([r["noise_log"] for r in timed], dtype=float), 50),
        "native_fast_1.0": share(lambda r: r["speedup"] > 1.0),
        "native_fast_sig_1.0": share(lambda r: r["speedup_ci_low"] > 1.0),
        "untimeable": sorted(r["task_id"] for r in rows if r["untimeable"]),
        "aa_speedup_median": pct(speeds, 50),
        "aa_speedup_p05": pct(speeds, 5),
        "aa_speedup_p95": pct(speeds, 95),
        "rounds_median": pct(np.array([r["rounds"] for r in timed if r.get("rounds")], dtype=float), 50),
        "stops": {s: sum(1 for r in timed if r.get("stop") == s) for s in sorted({r.get("stop") or "" for r in timed})},
    }


def coverage_line(summary: dict[str, Any]) -> str:
    """``A/A coverage: 38/40 tasks (95.0 %) ...`` in words, for the console and the report."""
    if not summary.get("timed"):
        return "A/A coverage: no task was timed"
    n = summary["timed"]
    return (f"A/A coverage: the {100 * summary['confidence']:.0f} % interval contains 1.0 for "
            f"{round(summary['coverage'] * n)}/{n} timed tasks ({100 * summary['coverage']:.1f} %); median "
            f"width {summary['ci_width_median']:.3f}, median noise floor +-{100 * math.expm1(summary['noise_log_median']):.1f} %; "
            f"native itself scores fast_1.0 on {100 * summary['native_fast_1.0']:.1f} % and significantly on "
            f"{100 * summary['native_fast_sig_1.0']:.1f} %"
            + (f"; median {summary['rounds_median']:g} rounds" if summary.get("rounds_median") is not None else ""))
