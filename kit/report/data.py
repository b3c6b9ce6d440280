"""A run's inputs for the report: its records, its denominator, its provenance and its noise floor.

Denominator: the tasks of ``tasks`` whose split has at least one record in the runs (so ``mkb report`` given
the whole suite scores a test-split run against the test split); with several such splits each gets its rows.

Input files of a run directory (all optional except the records):

- ``provenance.json``: an object with the keys :data:`PROVENANCE_KEYS` (``config_digest``, ``mnn_version``,
  ``compiler``, ``cpu_model``, ``threads``, ...); a missing key shows as ``unknown``.
- ``calibration.json``: the native A/A calibration written by ``mkb calibrate``:
  ``{"summary": {"aa_speedup_p05": f, "aa_speedup_p95": f, "aa_speedup_median": f, ...}, "tasks": [...]}``;
  or ``calibration.parquet`` with a ``speedup`` column (one A/A speedup per row), whose 5th–95th percentiles
  are used.  Without either, the ``native`` method's own speedups in the run (the A/A method) give the band.
  The band [p05, p95] is drawn as the noise floor on the speedup plots.  Each entry of ``tasks`` may carry
  ``noise_log`` (the half-width of that task's A/A 95 % interval on log scale, ln(ci_high / ci_low) / 2; a
  number >= 0 or null) and ``untimeable`` (bool); absent, the task has no noise figure / is not untimeable.
  The figures are the per-task noise bands of :func:`kit.score.metrics.summary`'s ``noise``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from kit.results import rules as scoring
from kit.results import shards
from kit.run import provenance

PROVENANCE_KEYS: tuple[str, ...] = (
    "config_digest",
    "mnn_version",
    "mnn_tree_digest",
    "engine",
    "compiler",
    "cpu_model",
    "arch",
    "threads",
    "precision",
    "python",
    "started_at",
    "generation",
)


class ReportError(Exception):
    """A run directory has no records, or an input file of a run is malformed (names the file)."""


@dataclass(frozen=True)
class Run:
    """One run directory as the report reads it (:func:`read_runs`)."""

    label: str
    dir: Path
    records: pl.DataFrame
    provenance: dict[str, str]
    calibration: dict[str, Any] | None
    tasks: pl.DataFrame
    """the run's denominator (:func:`run_tasks`)"""
    selected: bool
    """the denominator is a tasks.ids selection rather than whole splits"""


def read_runs(run_dirs: list[Path], task_table: pl.DataFrame) -> list[Run]:
    """One :class:`Run` per directory, labelled by its folder name (``name#2`` for a repeated name); with
    several runs each record's ``system`` is ``<run>/<method>``, else its ``method``.

    Raises:
        ReportError: a run without records, records of no task in ``task_table``, or a malformed input file.
    """
    multi = len(run_dirs) > 1
    runs: list[Run] = []
    for label, d in zip(_labels(run_dirs), run_dirs):
        recs = load_records(d)
        system = (pl.lit(f"{label}/") + pl.col("method")) if multi else pl.col("method")
        recs = recs.with_columns(run=pl.lit(label), system=system)
        prov, calibration = load_provenance(d), load_calibration(d, recs)
        runs.append(Run(label, d, recs, prov, calibration, *run_tasks(d, recs, task_table)))
    return runs


def load_records(run_dir: Path) -> pl.DataFrame:
    """Deduplicated records of ``run_dir`` (shards, else ``results.parquet``).

    Raises:
        ReportError: neither exists.
    """
    if shards.shard_paths(run_dir):
        return shards.read_records(run_dir)
    merged = run_dir / shards.RESULTS_FILE
    if merged.is_file():
        try:
            return shards.read_files([merged])
        except shards.ShardError as exc:
            raise ReportError(str(exc)) from exc
    raise ReportError(
        f"{run_dir}: no records (no {shards.SHARDS_DIR}/*.parquet and no {shards.RESULTS_FILE})"
    )


def run_tasks(run_dir: Path, records: pl.DataFrame, task_table: pl.DataFrame) -> tuple[pl.DataFrame, bool]:
    """The tasks ``run_dir``'s records are scored against (its denominator), as ``mkb eval`` scored them:
    the task selection (``tasks.split``, ``tasks.ids``) of each of its sessions, from ``provenance.json``
    (:func:`kit.run.provenance.task_selections`; several sessions: their union).  A run without that record
    (an older kit, no file) is scored against every task of each split its records touch.  Returns those
    rows of ``task_table`` and whether every session chose its tasks by ``tasks.ids``.

    Raises:
        ReportError: the selection names tasks ``task_table`` lacks, or nothing is left (wrong tasks folder).
    """
    try:
        selections = provenance.task_selections(provenance.load(run_dir))
    except provenance.ProvenanceError as exc:
        raise ReportError(str(exc)) from exc
    if selections is None:
        used = task_table.filter(pl.col("task_id").is_in(records["task_id"].unique().implode()))["split"].unique()
        out, by_ids = task_table.filter(pl.col("split").is_in(used.implode())), False
    else:
        known = set(task_table["task_id"].to_list())
        missing = sorted({i for sel in selections for i in sel.ids} - known)
        if missing:
            raise ReportError(f"tasks: {run_dir} was evaluated on task ids the task table lacks "
                              f"({', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}); wrong tasks directory?")
        keep = pl.lit(False)
        for sel in selections:
            one = pl.lit(True) if sel.split == "all" else pl.col("split") == sel.split
            if sel.ids:
                one = one & pl.col("task_id").is_in(sel.ids)
            keep = keep | one
        out, by_ids = task_table.filter(keep), all(sel.ids for sel in selections)
    if out.height == 0:
        raise ReportError(
            f"tasks: none of the {records['task_id'].n_unique()} task ids in the records of {run_dir} is in the "
            f"task table ({task_table.height} tasks); wrong tasks directory?"
        )
    return out, by_ids


def load_provenance(run_dir: Path) -> dict[str, str]:
    """``run_dir/provenance.json`` as strings for :data:`PROVENANCE_KEYS` (``unknown`` when missing; a key
    that differed between the run's sessions shows every session's value, ``a | b (differs between
    sessions)``, see :mod:`kit.run.provenance`).

    Raises:
        ReportError: the file is damaged (:class:`kit.run.provenance.ProvenanceError`: not a JSON object, or a
            key of the wrong type).
    """
    try:
        prov = provenance.load(run_dir) or provenance.Provenance()
    except provenance.ProvenanceError as exc:
        raise ReportError(str(exc)) from exc
    out = {k: "unknown" if (v := prov.fact(k)) in (None, "") else _fact_text(v) for k in PROVENANCE_KEYS}
    for k, values in prov.differs.items():
        if k in out:
            out[k] = " | ".join(dict.fromkeys(str(v) for v in values if v is not None)) + " (differs between sessions)"
    return out


def _fact_text(value: Any) -> str:
    """A provenance value as the report's table shows it: the model's answers (``generation``) in words."""
    if isinstance(value, dict) and "model" in value:
        g = value
        sampling = ", ".join(f"{k} {g[k]}" for k in ("temperature", "top_p", "max_tokens", "seed") if g.get(k) is not None)
        return (f"{g['model']} at {g.get('endpoint_host')}: {g.get('answers')} answers ({g.get('samples')} per task"
                f"{'; ' + sampling if sampling else ''}), tokens {g.get('prompt_tokens')} in / "
                f"{g.get('completion_tokens')} out, finish {g.get('finish_reasons')}, prompts "
                f"{str(g.get('prompts_sha256'))[:12]}")
    return str(value)


def load_calibration(run_dir: Path, records: pl.DataFrame) -> dict[str, Any] | None:
    """Noise floor ``{"low", "high", "median", "source", "noise", "untimeable_tasks"}`` or None (module
    docstring): ``low``/``high``/``median`` the band of A/A speedups (None when the file gives none),
    ``noise`` task id → ``noise_log`` and ``untimeable_tasks`` (sorted) from ``calibration.json``'s tasks
    (empty from the other sources).

    Raises:
        ReportError: a calibration file lacks the fields it needs, or a task entry is malformed.
    """
    js, pq = run_dir / "calibration.json", run_dir / "calibration.parquet"
    if js.is_file():
        try:
            data = json.loads(js.read_text(encoding="utf-8"))
            summ = data["summary"]
            # absent where the file holds only a between-run figure (mkb calibrate --between-runs into a run of
            # mkb eval, which has no A/A run of its own): no band
            low, high = summ.get("aa_speedup_p05"), summ.get("aa_speedup_p95")
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
            raise ReportError(f"{js}: expected {{'summary': {{...}}}}: {exc!r}") from exc
        per_task = _calibration_tasks(js, data.get("tasks"))
        if (low is None or high is None) and not (per_task["noise"] or per_task["untimeable_tasks"]):
            return None
        return {
            "low": None if low is None or high is None else float(low),
            "high": None if low is None or high is None else float(high),
            "median": summ.get("aa_speedup_median"),
            "source": js.name,
            "summary": summ,
            **per_task,
        }
    if pq.is_file():
        df = pl.read_parquet(pq)
        if "speedup" not in df.columns:
            raise ReportError(f"{pq}: missing column 'speedup'")
        s = df["speedup"].drop_nulls().to_numpy()
        return _band(s, pq.name)
    # the native method's usable speedups only (kit.results.rules: not timing_failed, emulated, untimeable, flagged)
    native = scoring.with_optional_columns(records).filter(
        (pl.col("method") == "native") & scoring.scorable_speedup([])
    )["speedup"]
    return _band(native.to_numpy(), "native method in this run")


def _calibration_tasks(js: Path, tasks: Any) -> dict[str, Any]:
    """``{"noise": {task_id: noise_log}, "untimeable_tasks": [...]}`` from the ``tasks`` entries of
    calibration.json ``js`` (module docstring; a null or absent field: no figure, not untimeable).

    Raises:
        ReportError: ``tasks`` is not a list of objects with a ``task_id``, or a ``noise_log`` is not a finite
            number >= 0 (names the file and the task).
    """
    tasks = [] if tasks is None else tasks
    if not isinstance(tasks, list) or not all(isinstance(t, dict) and isinstance(t.get("task_id"), str) for t in tasks):
        raise ReportError(f"{js}: 'tasks' must be a list of objects with a 'task_id'")
    noise: dict[str, float] = {}
    for t in tasks:
        v = t.get("noise_log")
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
            raise ReportError(f"{js}: task {t['task_id']!r}: noise_log {v!r}, expected a finite number >= 0 or null")
        noise[t["task_id"]] = float(v)
    untimeable = sorted(t["task_id"] for t in tasks if t.get("untimeable") is True)
    return {"noise": noise, "untimeable_tasks": untimeable}


def _band(s: np.ndarray, source: str) -> dict[str, Any] | None:
    if s.size == 0:
        return None
    return {
        "low": float(np.percentile(s, 5)),
        "high": float(np.percentile(s, 95)),
        "median": float(np.median(s)),
        "source": source,
        "noise": {},
        "untimeable_tasks": [],
    }


def _labels(run_dirs: list[Path]) -> list[str]:
    labels: list[str] = []
    for d in run_dirs:
        name = d.resolve().name or "run"
        label, i = name, 2
        while label in labels:
            label, i = f"{name}#{i}", i + 1
        labels.append(label)
    return labels
