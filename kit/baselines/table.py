"""The baseline tables on disk: one Parquet file per key (:class:`kit.baselines.key.BaselineKey`) under the
kit cache, ``<cache>/baselines/<key>.parquet``, one row per native measurement (:class:`Entry`).

Every row repeats its table's key columns (hardware fingerprint, MNN version, flags digest and their parts), so
a file describes itself.  Writers on one node (the workers of a run, several runs) take the file's lock
(``<key>.lock``, ``fcntl.flock``), read it, add the row and replace it atomically (temp file, rename); readers
never lock (they see the file before or after a write).  Each (task, task digest) keeps its
:data:`MAX_ENTRIES` newest measurements.  Times are milliseconds of the task's target op types per forward
pass (``native_ms``, op basis) and of the whole forward (``native_model_ms``), geometric means of the
measurement's round medians, which are kept too (``native_round_ms``, ``native_model_round_ms``).
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from kit.baselines.key import BaselineKey

#: measurements kept per task and task digest in a table (the newest; older ones are dropped on write)
MAX_ENTRIES = 20
#: the file name suffix of a table
SUFFIX = ".parquet"

#: the column types of a table file (written explicitly: an all-null column keeps its type)
SCHEMA = pl.Schema({
    "key": pl.String(), "fingerprint_id": pl.String(), "fingerprint": pl.String(), "hardware": pl.String(),
    "mnn_version": pl.String(), "flags_digest": pl.String(), "native_key": pl.String(), "threads": pl.Int64(),
    "precision": pl.String(), "warmup": pl.Int64(), "iterations": pl.Int64(),
    "task_id": pl.String(), "task_sha256": pl.String(), "native_ms": pl.Float64(), "native_model_ms": pl.Float64(),
    "native_round_ms": pl.List(pl.Float64()), "native_model_round_ms": pl.List(pl.Float64()),
    "native_op_types": pl.String(), "rounds": pl.Int64(), "recorded_at": pl.String(), "source": pl.String(),
    "job_id": pl.String(), "method": pl.String(),
})


class TableError(Exception):
    """A table file is not a baseline table (names the file and what is wrong)."""


@dataclass(frozen=True)
class Entry:
    """One native measurement of one task (module docstring for the units); ``native_op_types``: op type →
    ops executed per forward in the native model; ``source``: the run directory whose job measured it,
    ``job_id`` that job, ``method`` its method (``native`` for ``mkb calibrate``)."""

    task_id: str
    task_sha256: str
    native_ms: float
    native_model_ms: float
    native_round_ms: list[float]
    native_model_round_ms: list[float]
    native_op_types: dict[str, int]
    rounds: int
    recorded_at: str
    source: str = ""
    job_id: str = ""
    method: str = ""
    key: str = field(default="", compare=False)


def table_path(root: Path, key: str) -> Path:
    """The file of table ``key`` under ``root``."""
    return root / f"{key}{SUFFIX}"


def _row(key: BaselineKey, entry: Entry) -> dict[str, Any]:
    d = key.describe()
    meta = {c: d[c] for c in ("key", "fingerprint_id", "hardware", "mnn_version", "flags_digest", "native_key",
                              "threads", "precision", "warmup", "iterations")}
    body = asdict(entry) | {"native_op_types": json.dumps(entry.native_op_types, sort_keys=True)}
    body.pop("key")
    return meta | {"fingerprint": json.dumps(key.hardware, sort_keys=True)} | body


def read_table(path: Path) -> pl.DataFrame:
    """The rows of the table file ``path`` (an empty frame of :data:`SCHEMA` when it does not exist).

    Raises:
        TableError: the file is not a Parquet file of :data:`SCHEMA`'s columns."""
    if not path.is_file():
        return pl.DataFrame(schema=SCHEMA)
    try:
        df = pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise TableError(f"{path}: not a readable baseline table ({str(exc).splitlines()[0]}); move it away") from None
    missing = [c for c in SCHEMA.names() if c not in df.columns]
    if missing:
        raise TableError(f"{path}: not a baseline table, columns {missing} missing; move it away")
    return df.select(SCHEMA.names()).cast(dict(SCHEMA))


def add_entry(root: Path, key: BaselineKey, entry: Entry) -> Path:
    """Add ``entry`` to the table of ``key`` under ``root`` (created with its folder), keeping the
    :data:`MAX_ENTRIES` newest of its task and digest; returns the table's path.

    Raises:
        TableError: the existing file is not a baseline table.
        OSError: the folder cannot be written."""
    root.mkdir(parents=True, exist_ok=True)
    path = table_path(root, key.key)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        df = pl.concat([read_table(path), pl.DataFrame([_row(key, entry)], schema=SCHEMA)])
        same = (pl.col("task_id") == entry.task_id) & (pl.col("task_sha256") == entry.task_sha256)
        # rank within the task's measurements, newest first (ISO-8601 UTC strings sort by time)
        newest = pl.col("recorded_at").rank("ordinal", descending=True).over(["task_id", "task_sha256"])
        df = df.filter(~same | (newest <= MAX_ENTRIES))
        fd, tmp = tempfile.mkstemp(prefix=f".{key.key}.", suffix=".tmp", dir=root)
        os.close(fd)
        try:
            df.write_parquet(tmp)
            os.replace(tmp, path)
        finally:
            Path(tmp).unlink(missing_ok=True)
    return path


def entries(df: pl.DataFrame) -> list[Entry]:
    """The rows of a table frame as :class:`Entry` objects (in the frame's order)."""
    out = []
    for r in df.iter_rows(named=True):
        out.append(Entry(task_id=r["task_id"], task_sha256=r["task_sha256"], native_ms=r["native_ms"],
                         native_model_ms=r["native_model_ms"], native_round_ms=list(r["native_round_ms"] or []),
                         native_model_round_ms=list(r["native_model_round_ms"] or []),
                         native_op_types=json.loads(r["native_op_types"] or "{}"), rounds=r["rounds"],
                         recorded_at=r["recorded_at"], source=r["source"] or "", job_id=r["job_id"] or "",
                         method=r["method"] or "", key=r["key"]))
    return out


def table_files(root: Path) -> list[Path]:
    """The table files under ``root``, sorted (none when it does not exist)."""
    return sorted(root.glob(f"*{SUFFIX}")) if root.is_dir() else []


def read_all(root: Path) -> pl.DataFrame:
    """The rows of every table under ``root`` in one frame.

    Raises:
        TableError: a file there is not a baseline table."""
    frames = [read_table(p) for p in table_files(root)]
    return pl.concat(frames) if frames else pl.DataFrame(schema=SCHEMA)


def summary(root: Path) -> pl.DataFrame:
    """One row per table under ``root``: ``key``, ``hardware`` (in words), ``fingerprint_id``, ``mnn_version``,
    ``flags_digest``, ``threads``, ``precision``, ``tasks`` (distinct task ids), ``entries`` (measurements) and
    ``last_recorded_at``; newest first.

    Raises:
        TableError: a file there is not a baseline table."""
    df = read_all(root)
    firsts = ("hardware", "fingerprint_id", "mnn_version", "flags_digest", "threads", "precision")
    return (df.group_by("key").agg(*(pl.col(c).first() for c in firsts), tasks=pl.col("task_id").n_unique(),
                                   entries=pl.len(), last_recorded_at=pl.col("recorded_at").max())
            .sort(["last_recorded_at", "key"], descending=[True, False]))
