"""Which between-run sd a comparison of speedups across runs uses (:mod:`kit.score.betweenrun`), per task, and
where it came from (``mkb reproduce``, the report of several runs).

Two sources, each giving the task's own figure, else its pooled one:

* the ``calibration.json`` of the first run directory given that has one (``mkb reproduce``: the reproduction's,
  then the bundle's; the report: the later run's, then the earlier's): an estimate from separate runs on that
  host (``mkb calibrate --between-runs``: A/A calibrations, whose two copies of native's code move together,
  and evaluations of the same candidates, whose code need not move with native's);
* the baseline tables of the records (``baseline_key``): the between-run sd of native's log op time on this
  hardware (:func:`kit.baselines.drift.between_run`): how far one side moves between runs.

A **paired** speedup (native timed in the same rounds, ``native_timing = "interleaved"``) uses the calibration's
figure: what moves both sides together cancels in the pair, so native's own drift is not what it is exposed to
(measured on MNN 3.2.2, the sample set in 6 separate runs of a quiet 2-core VM: HardSigmoid's native time had a
table tau of 19-20 %, its paired speedup 1.4 %).  Without one, the table's figure stands in, erring wide.  A
**table-timed** speedup (``native_timing = "table"``: native from other runs) uses the larger of the two, since it
is exposed to both.  Neither: :data:`kit.score.betweenrun.DEFAULT_LOG_SD`, said as the default.
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
    table_timed = set()
    if "native_timing" in records.columns:
        table_timed = set(records.filter(pl.col("native_timing") == "table")["task_id"].unique().to_list())

    def tau_of(task_id: str) -> Tau:
        from_cal = next((t for path, data in cals if (t := betweenrun.from_calibration(data, task_id, str(path)))),
                        None)
        from_table = next((t for key, est in tables if (t := betweenrun.from_calibration(
            {"between_run": est}, task_id, f"baseline table {key[:12]} (native times)"))), None)
        if task_id in table_timed:
            found = [t for t in (from_cal, from_table) if t]
            return max(found, key=lambda t: t.log_sd) if found else betweenrun.default_tau()
        return from_cal or from_table or betweenrun.default_tau()

    return tau_of
