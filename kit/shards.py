"""Per-worker Parquet shards of records: crash-safe appends, a scan over all shards, the resume set, a merge.

Layout of a run directory::

    run_dir/shards/<worker>-<seq>.parquet   one batch of records of one worker (seq: 6 digits, from 0)
    run_dir/shards/*.tmp                    a batch being written; never read (a killed writer leaves it)
    run_dir/results.parquet                 :func:`merge` output: all records, deduplicated

Parquet cannot be appended in place, so every flushed batch becomes a new file, written to a temporary
name and atomically renamed (``os.replace``) once complete and fsynced.  A reader therefore sees either
the whole batch or nothing.  Every file carries :data:`SHARD_SCHEMA` exactly (stable dtypes even when a
column is all null) plus the schema version both as the ``schema_version`` column and as the Parquet
key-value metadata entry ``mkb.schema_version``.

Dedupe rule: if a ``job_id`` appears more than once (a job retried after its worker was presumed lost
although it had written its record), the row with the **earliest ``started_at``** is kept; rows with an
empty ``started_at`` sort last; remaining ties keep the first in shard order (file name, then row).
"""

from __future__ import annotations

import enum
import os
import re
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel

from kit.records import SCHEMA_VERSION, Record

SHARDS_DIR = "shards"
RESULTS_FILE = "results.parquet"
METADATA_KEY = "mkb.schema_version"

_WORKER_RE = re.compile(r"^[A-Za-z0-9_.]+$")
_SHARD_RE = re.compile(r"^(?P<worker>[A-Za-z0-9_.]+)-(?P<seq>\d+)\.parquet$")


def _dtype(annotation: Any, where: str) -> pl.DataType:
    """The Polars dtype of a Record field annotation (``X | None`` is nullable ``X``)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin in (types.UnionType, typing.Union):
        if len(args) != 1:
            raise TypeError(f"{where}: unions other than 'X | None' have no Parquet column type")
        return _dtype(args[0], where)
    if origin is list:
        return pl.List(_dtype(args[0], where + "[]"))
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return pl.Struct(
                {n: _dtype(f.annotation, f"{where}.{n}") for n, f in annotation.model_fields.items()}
            )
        if issubclass(annotation, bool):
            return pl.Boolean()
        if issubclass(annotation, enum.Enum) or issubclass(annotation, str):
            return pl.String()
        if issubclass(annotation, int):
            return pl.Int64()
        if issubclass(annotation, float):
            return pl.Float64()
    raise TypeError(f"{where}: no Parquet column type for annotation {annotation!r}")


#: Column → dtype of every shard and of ``results.parquet``: one column per :class:`~kit.records.Record`
#: field, in field order, derived from the field annotations (never inferred from data, so a column keeps
#: its dtype when all its values are null): ``str``/enums → String, ``int`` → Int64, ``float`` → Float64,
#: ``bool`` → Boolean, ``list[float]`` → List(Float64), ``list[Diagnostic]``/``list[Trial]`` →
#: List(Struct) of their fields.
SHARD_SCHEMA: pl.Schema = pl.Schema(
    {name: _dtype(field.annotation, f"Record.{name}") for name, field in Record.model_fields.items()}
)


class ShardError(Exception):
    """A bad worker id, or a shard file that is not a record shard (the message names the file)."""


def records_frame(records: Iterable[Record]) -> pl.DataFrame:
    """Records as a DataFrame with exactly :data:`SHARD_SCHEMA` (zero rows allowed)."""
    return pl.DataFrame([r.to_row() for r in records], schema=SHARD_SCHEMA, orient="row")


def empty_frame() -> pl.DataFrame:
    """A zero-row frame with :data:`SHARD_SCHEMA`."""
    return pl.DataFrame(schema=SHARD_SCHEMA)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_parquet_atomic(df: pl.DataFrame, path: Path) -> None:
    """Write ``df`` to ``path`` via ``path.tmp`` + fsync + ``os.replace``; a reader never sees a partial file."""
    tmp = path.with_name(path.name + ".tmp")
    df.write_parquet(tmp, metadata={METADATA_KEY: str(SCHEMA_VERSION)})
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


class ShardWriter:
    """Appends one worker's records to ``run_dir/shards/<worker_id>-<seq>.parquet`` files.

    Args:
        run_dir: the run directory (created if missing).
        worker_id: letters, digits, ``_`` and ``.`` only (``-`` separates the sequence number).
        flush_every: records per shard file; the default 1 writes each record as soon as it is
            appended, so a SIGKILL never loses a record whose :meth:`append` returned.

    Sequence numbers continue after the worker's existing shards, so a resumed run never overwrites one.
    Not safe for two writers with the same ``worker_id`` at the same time.

    Raises:
        ShardError: an invalid ``worker_id`` or ``flush_every < 1``.
    """

    def __init__(self, run_dir: Path, worker_id: str, flush_every: int = 1) -> None:
        if not _WORKER_RE.match(worker_id):
            raise ShardError(f"worker_id {worker_id!r}: use only letters, digits, '_' and '.'")
        if flush_every < 1:
            raise ShardError(f"flush_every must be >= 1, got {flush_every}")
        self.dir = Path(run_dir) / SHARDS_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        self.worker_id = worker_id
        self.flush_every = flush_every
        self._buffer: list[Record] = []
        seqs = [
            int(m["seq"])
            for p in self.dir.iterdir()
            if (m := _SHARD_RE.match(p.name)) and m["worker"] == worker_id
        ]
        self._next_seq = max(seqs) + 1 if seqs else 0
        self.written: list[Path] = []

    def append(self, record: Record) -> None:
        """Buffer ``record``; write the buffer as a new shard once it holds ``flush_every`` records."""
        if not isinstance(record, Record):
            raise TypeError(f"expected a kit.records.Record, got {type(record).__name__}")
        self._buffer.append(record)
        if len(self._buffer) >= self.flush_every:
            self.flush()

    def flush(self) -> Path | None:
        """Write the buffered records (if any) as one new shard; returns its path or None."""
        if not self._buffer:
            return None
        path = self.dir / f"{self.worker_id}-{self._next_seq:06d}.parquet"
        write_parquet_atomic(records_frame(self._buffer), path)
        self._next_seq += 1
        self._buffer.clear()
        self.written.append(path)
        return path

    def close(self) -> None:
        self.flush()

    def __enter__(self) -> typing.Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def shard_paths(run_dir: Path) -> list[Path]:
    """Complete shard files of ``run_dir``, sorted by name (``*.tmp`` and other files ignored)."""
    d = Path(run_dir) / SHARDS_DIR
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir() if _SHARD_RE.match(p.name) and p.is_file())


def check_shards(paths: Iterable[Path]) -> None:
    """Check that every shard file of ``paths`` is a whole Parquet file (magic bytes at both ends; two
    4-byte reads per file).

    Raises:
        ShardError: one is not (names the file).
    """
    for path in paths:
        try:
            with path.open("rb") as f:
                head = f.read(4)
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - 4))
                tail = f.read(4)
        except OSError as exc:
            raise ShardError(f"{path}: cannot read the shard: {exc.strerror}") from exc
        if size < 12 or head != b"PAR1" or tail != b"PAR1":
            raise ShardError(f"{path}: not a Parquet record shard (truncated or another file); move it out of "
                             f"{path.parent} to go on")


def scan(run_dir: Path, dedupe: bool = True) -> pl.LazyFrame:
    """All records of ``run_dir``'s shards as a LazyFrame with :data:`SHARD_SCHEMA`.

    With ``dedupe`` (default) one row per ``job_id`` by the module's dedupe rule; otherwise every row.
    No shards (or no run directory) gives an empty frame.

    Raises:
        ShardError: a shard file is not a whole Parquet file (:func:`check_shards`).
    """
    paths = shard_paths(run_dir)
    if not paths:
        return empty_frame().lazy()
    check_shards(paths)
    # shards written before a Record field was added read it as null; a field since removed is dropped
    lf = pl.scan_parquet(paths, schema=SHARD_SCHEMA, missing_columns="insert", extra_columns="ignore")
    if not dedupe:
        return lf
    return (
        lf.with_row_index("_order")
        .sort(
            [
                pl.when(pl.col("started_at") == "").then(None).otherwise(pl.col("started_at")),
                pl.col("_order"),
            ],
            nulls_last=True,
            maintain_order=True,
        )
        .unique(subset="job_id", keep="first", maintain_order=True)
        .sort("_order")
        .drop("_order")
    )


def done_job_ids(run_dir: Path) -> set[str]:
    """The resume set: every ``job_id`` with a record in ``run_dir``'s shards."""
    df = scan(run_dir, dedupe=False).select("job_id").unique().collect()
    return set(df["job_id"].to_list())


def merge(run_dir: Path) -> Path:
    """Write the deduplicated records to ``run_dir/results.parquet`` (atomically) and return its path.

    The file is plain Parquet (zstd) with :data:`SHARD_SCHEMA`, readable by polars, pyarrow/pandas and DuckDB.
    """
    out = Path(run_dir) / RESULTS_FILE
    out.parent.mkdir(parents=True, exist_ok=True)
    write_parquet_atomic(scan(run_dir).collect(), out)
    return out


def read_schema_version(path: Path) -> int:
    """The ``mkb.schema_version`` key-value metadata of a shard or results file.

    Raises:
        ShardError: the file has no such entry.
    """
    meta = pl.read_parquet_metadata(path)
    if METADATA_KEY not in meta:
        raise ShardError(f"{path}: no {METADATA_KEY!r} in the Parquet key-value metadata")
    return int(meta[METADATA_KEY])
