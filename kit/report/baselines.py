"""The report's baseline-table sections: which table each run's timings used or wrote (``native_timing``,
``baseline_key`` of its records; the hardware from its ``provenance.json``), and the tasks whose interleaved
native times drift from that table beyond their noise band (:func:`kit.baselines.drift.drift`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import polars as pl

from kit.baselines.drift import DEFAULT_BAND_LOG, drift
from kit.baselines.table import TableError, read_table, table_path
from kit.report.data import Run
from kit.run import provenance


def _tables(run: Run) -> tuple[dict[str, dict[str, Any]], Path | None]:
    """The baseline tables the sessions of ``run`` described (key -> provenance entry) and the folder of the
    first that still exists on this machine (None: none does)."""
    try:
        prov = provenance.load(run.dir) or provenance.Provenance()
    except provenance.ProvenanceError:
        prov = provenance.Provenance()  # the provenance section names the damaged file
    described = [s.baselines for s in prov.all_sessions()]
    by_key = {d.key: d for d in described if d is not None and d.key is not None}
    roots = [Path(d.dir) for d in by_key.values() if d.dir is not None and Path(d.dir).is_dir()]
    return {k: d.dump() for k, d in by_key.items()}, (roots[0] if roots else None)


def tables_root(run: Run) -> Path | None:
    """The folder of the baseline tables ``run``'s sessions used, when it exists on this machine."""
    return _tables(run)[1]


def _hardware(key: str, described: dict[str, dict[str, Any]], root: Path | None) -> dict[str, Any]:
    """What is known of table ``key``: from provenance, else from the table file's first row, else nothing."""
    if key in described:
        return described[key]
    if root is not None:
        try:
            df = read_table(table_path(root, key))
        except TableError:
            return {}
        if df.height:
            return df.row(0, named=True)
    return {}


def _drift(run: Run) -> pl.DataFrame:
    _, root = _tables(run)
    if root is None or "native_timing" not in run.records.columns:
        return drift(pl.DataFrame(), run.dir, Path())
    noise = (run.calibration or {}).get("noise") or {}
    return drift(run.records, run.dir, root, noise)


def baselines_table(runs: list[Run]) -> pl.DataFrame:
    """One row per run and baseline key of its records: how many records timed native interleaved and how many
    took it from the table, the table's hardware, MNN version and flags digest, the tasks compared with it and
    those that drift."""
    rows = []
    for run in runs:
        described, root = _tables(run)
        recs = run.records
        if "baseline_key" not in recs.columns:  # records of an older kit
            continue
        drifted = _drift(run)
        for (key,), group in recs.filter(pl.col("baseline_key") != "").group_by(["baseline_key"], maintain_order=True):
            info = _hardware(str(key), described, root)
            mine = drifted.filter(pl.col("baseline_key") == key)
            rows.append({
                "run": run.label, "baseline_key": key, "hardware": str(info.get("hardware", "unknown")),
                "mnn_version": str(info.get("mnn_version", "unknown")),
                "flags_digest": str(info.get("flags_digest", "unknown")),
                "interleaved": group.filter(pl.col("native_timing") == "interleaved").height,
                "from_table": group.filter(pl.col("native_timing") == "table").height,
                "tasks_compared": mine.height,
                "drifting": ", ".join(mine.filter(pl.col("drifts"))["task_id"].to_list()) or "none"})
    return pl.DataFrame(rows) if rows else pl.DataFrame(schema={"run": pl.String(), "baseline_key": pl.String()})


def drift_table(runs: list[Run]) -> pl.DataFrame:
    """The tasks whose interleaved native op time drifts from the baseline table, by run (ms, rounded)."""
    frames = [_drift(r).filter(pl.col("drifts")).with_columns(run=pl.lit(r.label)) for r in runs]
    df = pl.concat(frames) if frames else pl.DataFrame()
    if df.height == 0:
        return pl.DataFrame(schema={"run": pl.String(), "task_id": pl.String()})
    return df.select("run", "task_id", "baseline_key", pl.col("run_native_ms").round(6),
                     pl.col("table_native_ms").round(6), "table_entries", pl.col("ratio").round(3),
                     (pl.col("band").exp()).round(3).alias("band_factor"), "band_from")


def baselines_note(runs: list[Run]) -> str:
    """The note over the baseline-table section: which runs took native times from a table."""
    table_runs = [r.label for r in runs if "native_timing" in r.records.columns
                  and r.records.filter(pl.col("native_timing") == "table").height]
    what = (f"native times from a baseline table (baselines.native_timing = \"table\": only the candidate was "
            f"timed) in {', '.join(table_runs)}; their speedups are not interleaved and not comparable with one-phase "
            "speedups as like for like" if table_runs else "every native time was measured interleaved with its "
            "candidate")
    return (f"The baseline table of each run's hardware, MNN version and build flags (mkb baselines show KEY): {what}. "
            "A task drifts when its interleaved native op time differs from the table's (other runs' measurements) "
            f"by more than its A/A noise band, or {math.exp(DEFAULT_BAND_LOG) - 1:.0%} without one: the machine "
            "changed between the two.")
