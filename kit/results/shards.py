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

Readers (:func:`scan` through :func:`~kit.results.schema.check_shards`) refuse, naming the file, a shard that
is not a whole Parquet file, has no ``mkb.schema_version`` (another Parquet file), has a version newer than
:data:`~kit.results.records.SCHEMA_VERSION` (written by a newer kit), or has a column whose dtype differs from
:data:`SHARD_SCHEMA`.  Shards of an older version stay readable: a column they lack reads as null.  Damage
that only shows when the rows are read (a corrupted page) is named by :func:`collect`.  The schema and the
footer checks are in :mod:`kit.results.schema`.

Dedupe rule: if a ``job_id`` appears more than once, a record of a status that is not retried
(:data:`kit.results.rules.RETRIED`: ``harness_error``) wins over a retried one, so the retry of a harness error by
a resumed run is the record that counts.  Among records that are not retried (a job run again after its
worker was presumed lost although it had written its record) the **earliest ``started_at``** is kept; among
retried ones only, the latest.  Rows with an empty ``started_at`` sort last; remaining ties keep the first
in shard order (file name, then row).

Resume set (:func:`done_job_ids`, :func:`kit.run.rundir.recorded_jobs`): the job ids with a record of a status
that is not retried; a job whose records are all ``harness_error`` runs again.
"""

from __future__ import annotations

import os
import re
import typing
from collections.abc import Iterable, Sequence
from pathlib import Path

import polars as pl

from kit.results import rules as scoring
from kit.results.records import SCHEMA_VERSION, Record
from kit.results.schema import (
    METADATA_KEY,
    READ_ERRORS,
    SHARD_SCHEMA,
    ShardError,
    check_shards,
    first_line,
    move_away,
    read_schema_version,  # noqa: F401 - re-exported: kit.results.shards is where readers import it from
)

SHARDS_DIR = "shards"
RESULTS_FILE = "results.parquet"

_WORKER_RE = re.compile(r"^[A-Za-z0-9_.]+$")
_SHARD_RE = re.compile(r"^(?P<worker>[A-Za-z0-9_.]+)-(?P<seq>\d+)\.parquet$")


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
            raise TypeError(f"expected a kit.results.records.Record, got {type(record).__name__}")
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


class RecordSink:
    """Where a run's records go as they arrive: one :class:`ShardWriter` per worker name (names made safe
    for file names), each record written at once.  A context manager; closing flushes every writer."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self._writers: dict[str, ShardWriter] = {}

    def append(self, worker: str, record: Record) -> None:
        """Write ``record`` to the shard of ``worker`` (the worker that produced it)."""
        name = shard_name(worker)
        if name not in self._writers:
            self._writers[name] = ShardWriter(self.run_dir, name)
        self._writers[name].append(record)

    def close(self) -> None:
        for w in self._writers.values():
            w.close()

    def __enter__(self) -> typing.Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def shard_name(worker: str) -> str:
    """``worker`` as a shard's worker id: every character but letters, digits, ``_`` and ``.`` becomes ``_``."""
    return "".join(c if (c.isascii() and c.isalnum()) or c in "_." else "_" for c in worker) or "worker"


def shard_paths(run_dir: Path) -> list[Path]:
    """Complete shard files of ``run_dir``, sorted by name (``*.tmp`` and other files ignored)."""
    d = Path(run_dir) / SHARDS_DIR
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir() if _SHARD_RE.match(p.name) and p.is_file())


def _scan_files(paths: Sequence[Path]) -> pl.LazyFrame:
    # shards written before a Record field (or a field of a nested struct: Trial.threads) was added read it as
    # null; a field since removed is dropped
    return pl.scan_parquet(list(paths), schema=SHARD_SCHEMA, missing_columns="insert", extra_columns="ignore",
                           cast_options=pl.ScanCastOptions(missing_struct_fields="insert"))


def scan(run_dir: Path, dedupe: bool = True) -> pl.LazyFrame:
    """All records of ``run_dir``'s shards as a LazyFrame with :data:`SHARD_SCHEMA`.

    With ``dedupe`` (default) one row per ``job_id`` by the module's dedupe rule; otherwise every row.
    No shards (or no run directory) gives an empty frame.  Collect it with :func:`collect` so that a
    shard damaged inside (seen only when its rows are read) is named instead of a bare Polars error.

    Raises:
        ShardError: a shard file is not a readable record shard (:func:`check_shards`).
    """
    paths = shard_paths(run_dir)
    if not paths:
        return empty_frame().lazy()
    check_shards(paths)
    lf = _scan_files(paths)
    if not dedupe:
        return lf
    keys, descending = scoring.dedupe_order()
    return (
        lf.with_row_index("_order")
        .sort([*keys, pl.col("_order")], descending=[*descending, False], nulls_last=True, maintain_order=True)
        .unique(subset="job_id", keep="first", maintain_order=True)
        .sort("_order")
        .drop("_order")
    )


def collect(lf: pl.LazyFrame, run_dir: Path) -> pl.DataFrame:
    """``lf.collect()`` for a query built on :func:`scan` of ``run_dir``; when reading fails, the shards are
    read one by one (slow, only on that error) to name the damaged one.

    Raises:
        ShardError: a shard cannot be read (names the file and the Polars error).
        polars.exceptions.PolarsError: the query failed and every shard reads on its own.
    """
    return _collect_naming(lf, shard_paths(run_dir))


def _collect_naming(lf: pl.LazyFrame, paths: Sequence[Path]) -> pl.DataFrame:
    """``lf.collect()``; on a read error, read ``paths`` one by one to raise a ShardError naming the bad one."""
    try:
        return lf.collect()
    except READ_ERRORS:
        for path in paths:
            try:
                _scan_files([path]).collect()
            except READ_ERRORS as err:
                raise ShardError(f"{path}: cannot read the shard ({first_line(err)}); {move_away(path)}") from err
        raise


def read_files(paths: Sequence[Path]) -> pl.DataFrame:
    """The records of record files ``paths`` (shards, or a :func:`merge` output), checked as
    :func:`check_shards` does and read with :data:`SHARD_SCHEMA`, no dedupe.

    Raises:
        ShardError: a file is not a readable record file (names it)."""
    check_shards(paths)
    return _collect_naming(_scan_files(paths), paths)


def read_records(run_dir: Path, dedupe: bool = True) -> pl.DataFrame:
    """``scan(run_dir, dedupe)`` collected by :func:`collect` (a damaged shard is named).

    Raises:
        ShardError: a shard file is not a readable record shard.
    """
    return collect(scan(run_dir, dedupe=dedupe), run_dir)


def done_job_ids(run_dir: Path) -> set[str]:
    """The resume set: every ``job_id`` with a record in ``run_dir``'s shards whose status is not retried
    (a job recorded only as ``harness_error`` is left out: a resumed run runs it again)."""
    df = collect(scan(run_dir, dedupe=False).filter(~scoring.is_retried()).select("job_id").unique(), run_dir)
    return set(df["job_id"].to_list())


def merge(run_dir: Path) -> Path:
    """Write the deduplicated records to ``run_dir/results.parquet`` (atomically) and return its path.

    The file is plain Parquet (zstd) with :data:`SHARD_SCHEMA`, readable by polars, pyarrow/pandas and DuckDB.

    Raises:
        ShardError: ``run_dir`` is not an existing directory, has no ``shards`` directory or no shard file
            in it (nothing to merge; no file is written), or a shard is not a readable record shard.
    """
    run_dir = Path(run_dir)
    shards_dir = run_dir / SHARDS_DIR
    if not run_dir.exists():
        raise ShardError(f"{run_dir}: no such run directory; no records to merge")
    if not run_dir.is_dir():
        raise ShardError(f"{run_dir}: not a directory (expected a run directory); no records to merge")
    if not shards_dir.exists():
        raise ShardError(f"{run_dir}: no {SHARDS_DIR} directory (not a run directory, or no job has finished "
                         f"yet); no records to merge")
    if not shards_dir.is_dir():
        raise ShardError(f"{shards_dir}: not a directory; no records to merge")
    if not shard_paths(run_dir):
        raise ShardError(f"{shards_dir}: no shard files (<worker>-<seq>.parquet); no records to merge")
    out = run_dir / RESULTS_FILE
    write_parquet_atomic(read_records(run_dir), out)
    return out
