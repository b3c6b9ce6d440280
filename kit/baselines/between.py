"""Which between-run sd a comparison of speedups across runs uses (:mod:`kit.score.betweenrun`), per task, and
where it came from (``mkb reproduce``, the report of several runs).

Two sources, each giving the task's own figure, else its pooled one; the **larger** of the two is used:

* the ``calibration.json`` of the first run directory given that has one (``mkb reproduce``: the reproduction's,
  then the bundle's; the report: the later run's, then the earlier's): an estimate from separate A/A
  calibrations on that host (``mkb calibrate --between-runs``).  A/A pairs two copies of the same code, which
  move together between runs; a candidate's code need not move with native's;
* the baseline tables of the records (``baseline_key``): the between-run sd of native's log op time on this
  hardware (:func:`kit.baselines.drift.between_run`): how far one side moves between runs.

The larger, because each misses what the other sees (measured on the fixture engine, 8 separate A/A
calibrations of 3 tasks on the loaded 2-core VM: A/A 0.000 before the floor, native times of the same runs
0.012).  Neither: :data:`kit.score.betweenrun.DEFAULT_LOG_SD`, said as the default.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import polars as pl

from kit.baselines.drift import between_run as table_between_run
from kit.baselines.table import TableError, read_table, table_path
from kit.score import betweenrun
from kit.score.betweenrun import CALIBRATION_FILE, Tau


def _calibration(path: Path) -> dict | None:
    """The content of calibration file ``path`` (None when missing or unreadable: it is then no source)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _tables(root: Path | None, records: pl.DataFrame) -> list[tuple[str, dict]]:
    """``(key, between-run figures)`` of each baseline table the ``records`` name that has a pooled figure."""
    if root is None or "baseline_key" not in records.columns:
        return []
    out = []
    for key in sorted(k for k in records["baseline_key"].unique().to_list() if k):
        try:
            est = table_between_run(read_table(table_path(root, key)))
        except TableError:
            continue
        if est["pooled"] is not None:
            out.append((key, est))
    return out


def resolver(run_dirs: list[Path], records: pl.DataFrame, tables_root: Path | None) -> Callable[[str], Tau]:
    """A function task id -> :class:`kit.score.betweenrun.Tau` over the sources of the module docstring
    (the first of ``run_dirs`` with a figure, the tables under ``tables_root`` that ``records`` name)."""
    cals = [(d / CALIBRATION_FILE, _calibration(d / CALIBRATION_FILE)) for d in run_dirs]
    tables = _tables(tables_root, records)

    def tau_of(task_id: str) -> Tau:
        from_cal = (betweenrun.from_calibration(data, task_id, str(path)) for path, data in cals)
        from_tables = (betweenrun.from_calibration({"between_run": est}, task_id,
                                                   f"baseline table {key[:12]} (native times)") for key, est in tables)
        found = [t for t in (next((t for t in from_cal if t), None), next((t for t in from_tables if t), None)) if t]
        return max(found, key=lambda t: t.log_sd) if found else betweenrun.default_tau()

    return tau_of
