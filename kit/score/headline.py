"""The text of the metrics: the line per method that ``mkb eval`` prints at its end.

``sample: CSR 62.5% FCR 37.5% fast_0 25.0% ... (150 tasks geomean 0.82x over the 7 with a speedup)``: the
figures of :func:`kit.score.metrics.summary` (definitions there, paper §5.1), the denominator and the geometric mean
speedup with how many tasks it covers.  Harness errors (the kit's fault) are named when there are any:
``(150 tasks, 3 harness errors: rerun to retry; geomean ...)``: a resumed run retries those jobs.  Tasks
whose correct sample was timed only under emulation (a cross target verified under qemu) are counted, since
their speedups are never scored: ``(4 tasks, 3 timed under emulation: not scored)``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Sequence
from typing import TextIO

import polars as pl

from kit.score.metrics import DEFAULT_PS, Bootstrap, fast_col, summary


def format_headline(row: dict, ps: Sequence[float] = DEFAULT_PS) -> str:
    """``"CSR 62.5% FCR 37.5% fast_0 25.0% ... fast_2.0 0.0%"`` for one :func:`summary` row (as a dict)."""

    def pct(v: float | None) -> str:
        return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f}%"

    parts = [f"CSR {pct(row['csr'])}", f"FCR {pct(row['fcr'])}"]
    parts += [f"{fast_col(p)} {pct(row[fast_col(p)])}" for p in ps]
    return " ".join(parts)


def headline_lines(summary_df: pl.DataFrame, ps: Sequence[float] = DEFAULT_PS) -> list[str]:
    """One headline line per row of ``summary_df``, prefixed with its key columns (run, method, ...)."""
    keys = [c for c in summary_df.columns if c in ("run", "method", "category", "split")]
    lines = []
    for row in summary_df.iter_rows(named=True):
        label = " ".join(str(row[k]) for k in keys)
        notes = [f"{row['n_tasks']} tasks"]
        if row.get("n_harness_errors"):
            n = row["n_harness_errors"]
            notes.append(f"{n} harness error{'s' if n != 1 else ''}: rerun to retry")
        if row.get("n_emulated"):
            notes.append(f"{row['n_emulated']} timed under emulation: not scored")
        inner = ", ".join(notes)
        if row.get("geomean_speedup") is not None:
            inner += (";" if len(notes) > 1 else "") + (
                f" geomean {row['geomean_speedup']:.2f}x over the {row['n_with_speedup']} with a speedup")
        lines.append(f"{label}: {format_headline(row, ps)} ({inner})")
    return lines


def headline(
    records: pl.DataFrame | pl.LazyFrame, tasks: pl.DataFrame | Iterable, ps: Sequence[float] = DEFAULT_PS
) -> str:
    """The end-of-``mkb eval`` text: one headline line per method (bootstrap skipped: no CIs shown).

    ``tasks`` is the task table or a list of :class:`kit.suite.tasks.Task` (the denominator).
    """
    df = summary(records, tasks, ps=ps, boot=Bootstrap(n=1))
    if df.height == 0:
        return "no records"
    return "\n".join(headline_lines(df, ps))


def print_headline(
    summary_df: pl.DataFrame, ps: Sequence[float] = DEFAULT_PS, file: TextIO | None = None
) -> None:
    """Print :func:`headline_lines` of ``summary_df`` to ``file`` (default stdout)."""
    for line in headline_lines(summary_df, ps):
        print(line, file=file or sys.stdout)
