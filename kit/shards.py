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

Readers (:func:`scan` through :func:`check_shards`) refuse, naming the file, a shard that is not a whole
Parquet file, has no ``mkb.schema_version`` (another Parquet file), has a version newer than
:data:`~kit.records.SCHEMA_VERSION` (written by a newer kit), or has a column whose dtype differs from
:data:`SHARD_SCHEMA`.  Shards of an older version stay readable: a column they lack reads as null.  Damage
that only shows when the rows are read (a corrupted page) is named by :func:`collect`.

Dedupe rule: if a ``job_id`` appears more than once (a job retried after its worker was presumed lost
although it had written its record), the row with the **earliest ``started_at``** is kept; rows with an
empty ``started_at`` sort last; remaining ties keep the first in shard order (file name, then row).
"""

from __future__ import annotations

import enum
import functools
import io
import os
import re
import types
import typing
from collections.abc import Iterable, Sequence
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
    """A bad worker id, a shard file that is not a readable record shard (the message names the file), or
    a run directory with no records to merge."""


#: what reading a bad Parquet file can raise (a Rust panic is a BaseException, not an Exception)
_READ_ERRORS: tuple[type[BaseException], ...] = (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError)


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


def _move_away(path: Path) -> str:
    return f"move it out of {path.parent} to go on"


@functools.cache
def _written_arrow_schema() -> str | None:
    """The ``ARROW:schema`` metadata entry this Polars writes for :data:`SHARD_SCHEMA` (a shard that carries
    exactly this one has the schema's dtypes: no need for the slower schema read)."""
    buf = io.BytesIO()
    empty_frame().write_parquet(buf)
    return pl.read_parquet_metadata(buf.getvalue()).get("ARROW:schema")


def _fits(dtype: pl.DataType, target: pl.DataType) -> bool:
    """A file column of ``dtype`` reads as ``target``: the same dtype, or null (all-null written as Null)
    where ``target`` has a value, also inside lists and structs."""
    if dtype == target or isinstance(dtype, pl.Null):
        return True
    if isinstance(dtype, pl.List) and isinstance(target, pl.List):
        return _fits(dtype.inner, target.inner)
    if isinstance(dtype, pl.Struct) and isinstance(target, pl.Struct):
        return [f.name for f in dtype.fields] == [f.name for f in target.fields] and all(
            _fits(f.dtype, g.dtype) for f, g in zip(dtype.fields, target.fields, strict=True)
        )
    return False


def _version(path: Path, meta: dict[str, str]) -> int:
    raw = meta.get(METADATA_KEY)
    if raw is None:
        raise ShardError(f"{path}: no {METADATA_KEY!r} in the Parquet key-value metadata")
    try:
        return int(raw)
    except ValueError:
        raise ShardError(f"{path}: {METADATA_KEY!r} is {raw!r} in the Parquet key-value metadata, not a "
                         f"schema version") from None


def _check_footer(path: Path) -> None:
    """One shard's Parquet footer: schema version and column dtypes (see :func:`check_shards`)."""
    try:
        meta = pl.read_parquet_metadata(path)
    except _READ_ERRORS as exc:
        raise ShardError(f"{path}: not a Parquet record shard (damaged footer: {_first_line(exc)}); "
                         f"{_move_away(path)}") from exc
    if METADATA_KEY not in meta:
        raise ShardError(f"{path}: not a record shard (a Parquet file without the {METADATA_KEY!r} metadata "
                         f"that every shard carries); {_move_away(path)}")
    try:
        version = _version(path, meta)
    except ShardError as exc:
        raise ShardError(f"{exc}; {_move_away(path)}") from None
    if version > SCHEMA_VERSION:
        raise ShardError(f"{path}: record schema version {version} is newer than this kit's ({SCHEMA_VERSION}): "
                         f"written by a newer mkb? Read the run with that version, or {_move_away(path)}")
    if version < 1:
        raise ShardError(f"{path}: record schema version {version} does not exist (versions start at 1); "
                         f"{_move_away(path)}")
    arrow_schema = meta.get("ARROW:schema")
    if arrow_schema is not None and arrow_schema == _written_arrow_schema():
        return  # written with exactly SHARD_SCHEMA: the usual case, no schema read needed
    try:
        schema = pl.read_parquet_schema(path)
    except _READ_ERRORS as exc:
        raise ShardError(f"{path}: not a Parquet record shard (unreadable schema: {_first_line(exc)}); "
                         f"{_move_away(path)}") from exc
    if "job_id" not in schema:
        raise ShardError(f"{path}: not a record shard (no job_id column); {_move_away(path)}")
    bad = [f"{name} is {dtype}, expected {SHARD_SCHEMA[name]}" for name, dtype in schema.items()
           if name in SHARD_SCHEMA and not _fits(dtype, SHARD_SCHEMA[name])]
    if bad:
        raise ShardError(f"{path}: column types differ from the record schema ({'; '.join(bad)}); "
                         f"{_move_away(path)}")


def check_shards(paths: Iterable[Path]) -> None:
    """Check every shard file of ``paths``: a whole Parquet file (magic bytes at both ends), whose footer
    carries a known ``mkb.schema_version`` (1 up to :data:`~kit.records.SCHEMA_VERSION`; older shards stay
    readable, a newer one is refused) and, for the columns it has, the dtypes of :data:`SHARD_SCHEMA`
    (missing columns read as null, extra ones are ignored).

    Cost: two 4-byte reads and one footer read per file; a file whose ``ARROW:schema`` entry is not the
    one this Polars writes for :data:`SHARD_SCHEMA` (an older version's shard) takes a second, slower
    schema read.  Damage inside the data pages is not seen here (see :func:`collect`).

    Raises:
        ShardError: one is not a readable record shard (names the file and the fault).
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
        _check_footer(path)


def _scan_files(paths: Sequence[Path]) -> pl.LazyFrame:
    # shards written before a Record field was added read it as null; a field since removed is dropped
    return pl.scan_parquet(list(paths), schema=SHARD_SCHEMA, missing_columns="insert", extra_columns="ignore")


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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


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
    except _READ_ERRORS:
        for path in paths:
            try:
                _scan_files([path]).collect()
            except _READ_ERRORS as err:
                raise ShardError(f"{path}: cannot read the shard ({_first_line(err)}); {_move_away(path)}") from err
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
    """The resume set: every ``job_id`` with a record in ``run_dir``'s shards."""
    df = collect(scan(run_dir, dedupe=False).select("job_id").unique(), run_dir)
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


def read_schema_version(path: Path) -> int:
    """The ``mkb.schema_version`` key-value metadata of a shard or results file.

    Raises:
        ShardError: the file has no such entry, or it is not an integer.
    """
    return _version(path, pl.read_parquet_metadata(path))
