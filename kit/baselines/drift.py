"""The report's health check: a run's interleaved native times against the baseline table.

Every interleaved timing measures native MNN again; on the same hardware, build and settings its op time should
agree with what the table measured before.  Per task of a run: ``run_native_ms``, the geometric mean of the run's
interleaved ``native_ms`` (records with ``native_timing = "interleaved"``), and ``table_native_ms``, the median
of the table's measurements of that task and task digest (the digest of the entries the run's own jobs wrote)
that other runs took (entries whose ``source`` is another run directory: a run is not compared with itself).  The run **drifts** on a task when
``|ln(run_native_ms / table_native_ms)| > band``, the band being the task's A/A noise band ``noise_log`` from the
run's calibration (docs/scoring.md, "Per-task noise bands") where there is one, else :data:`DEFAULT_BAND_LOG`.
A drift says the machine or its load changed between the two measurements: its speedups are still paired within
their rounds, but a table-mode run on it would be off by that much.
"""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl

from kit.baselines.table import TableError, read_table, table_path
from kit.score import betweenrun

#: the band (ln of the ratio of native op times) of a task without an A/A noise figure: ln(1.25).  Measured on
#: the fixture engine, 3 runs of 2 tasks on the loaded 2-core dev VM (1 thread, 3 rounds x 10 iterations, load
#: 2.5-3.8): the largest to smallest native op time of a task across the runs was 1.11 (fx_argmax) and 1.013
#: (fx_exp); 1.25 leaves room for a busier machine without hiding a changed one
DEFAULT_BAND_LOG = math.log(1.25)

#: the columns of :func:`drift`
COLUMNS = {"task_id": pl.String(), "baseline_key": pl.String(), "run_native_ms": pl.Float64(),
           "table_native_ms": pl.Float64(), "table_entries": pl.Int64(), "ratio": pl.Float64(),
           "band": pl.Float64(), "band_from": pl.String(), "drifts": pl.Boolean()}


def drift(records: pl.DataFrame, run_dir: Path, root: Path, noise: dict[str, float] | None = None) -> pl.DataFrame:
    """One row per (task, baseline key) of the interleaved native times of ``records``, the records of run
    directory ``run_dir``, that the tables under ``root`` can be compared with (module docstring; :data:`COLUMNS`: ``ratio`` = run / table, ``band`` the ratio's
    allowed ln, ``band_from`` ``calibration`` or ``default``).  Tasks without a comparable table entry have no
    row; a table file that cannot be read counts as none."""
    if "native_timing" not in records.columns:
        return pl.DataFrame(schema=COLUMNS)
    mine = records.filter((pl.col("native_timing") == "interleaved") & (pl.col("baseline_key") != "")
                          & pl.col("native_ms").is_not_null() & (pl.col("native_ms") > 0))
    source = str(Path(run_dir).resolve())
    rows = []
    for (key,), group in mine.group_by(["baseline_key"]):
        try:
            table = read_table(table_path(root, str(key)))
        except TableError:
            continue
        rows += _compare(group, table, source, str(key), noise or {})
    return pl.DataFrame(rows, schema=COLUMNS).sort("task_id") if rows else pl.DataFrame(schema=COLUMNS)


def _compare(group: pl.DataFrame, table: pl.DataFrame, source: str, key: str,
             noise: dict[str, float]) -> list[dict]:
    """The rows of :func:`drift` of one key's records ``group`` (of the run directory ``source``) against its
    ``table``."""
    out = []
    for (task_id,), recs in group.group_by(["task_id"]):
        entries = table.filter(pl.col("task_id") == task_id)
        own = pl.col("source") == source
        digests = entries.filter(own)["task_sha256"].unique().to_list()
        others = entries.filter(pl.col("task_sha256").is_in(digests) & ~own)
        if others.height == 0:
            continue
        run_ms = math.exp(float(recs["native_ms"].log().mean()))
        table_ms = float(others["native_ms"].median())
        band, band_from = (noise[task_id], "calibration") if task_id in noise else (DEFAULT_BAND_LOG, "default")
        ratio = run_ms / table_ms
        out.append({"task_id": task_id, "baseline_key": key, "run_native_ms": run_ms, "table_native_ms": table_ms,
                    "table_entries": others.height, "ratio": ratio, "band": band, "band_from": band_from,
                    "drifts": abs(math.log(ratio)) > band})
    return out


def between_run(table: pl.DataFrame) -> dict:
    """The between-run sd of native's log op time in baseline table ``table`` (rows of
    :data:`kit.baselines.table.SCHEMA`): one point per task, task digest and run directory (``source``: the
    entries a run wrote pooled, ``native_round_ms`` giving its mean log and that mean's se), estimated by
    :func:`kit.score.betweenrun.estimate` (DerSimonian-Laird).  It is one side's run-to-run movement on this
    hardware (what a table-timed speedup is exposed to, ``baselines.native_timing = "table"``); empty figures
    (``pooled`` None) without two runs of a task."""
    by_task: dict[str, list[tuple[float, float]]] = {}
    for (task_id, digest, _source), group in table.group_by(["task_id", "task_sha256", "source"]):
        rounds = [x for rs in group["native_round_ms"].to_list() if rs for x in rs]
        point = betweenrun.points_from_rounds(rounds)
        if point is not None:
            by_task.setdefault(f"{task_id}@{digest}", []).append(point)
    # per task id over its digests (each digest's runs keep a mean of their own)
    return betweenrun.estimate(by_task)
