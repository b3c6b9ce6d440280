"""The on-disk schema of record files (shards and ``results.parquet``) and the check that a file has it.

:data:`SHARD_SCHEMA` is derived from the :class:`~kit.results.records.Record` fields; every file written by
:mod:`kit.results.shards` carries it exactly plus the schema version as the Parquet key-value metadata entry
:data:`METADATA_KEY`.  :func:`check_shards` reads only each file's ends and footer and refuses, naming the
file, one that is not a whole Parquet file, has no ``mkb.schema_version`` (another Parquet file), has a
version newer than :data:`~kit.results.records.SCHEMA_VERSION` (written by a newer kit), or has a column whose
dtype differs from :data:`SHARD_SCHEMA`.  Shards of an older version pass: a column they lack reads as null.
"""

from __future__ import annotations

import enum
import functools
import io
import os
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel

from kit.results.records import SCHEMA_VERSION, Record

METADATA_KEY = "mkb.schema_version"


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


#: Column → dtype of every shard and of ``results.parquet``: one column per :class:`~kit.results.records.Record`
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
READ_ERRORS: tuple[type[BaseException], ...] = (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError)


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (its type name when the message is empty)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def move_away(path: Path) -> str:
    """The hint that ends every refusal of a bad record file."""
    return f"move it out of {path.parent} to go on"


@functools.cache
def _written_arrow_schema() -> str | None:
    """The ``ARROW:schema`` metadata entry this Polars writes for :data:`SHARD_SCHEMA` (a shard that carries
    exactly this one has the schema's dtypes: no need for the slower schema read)."""
    buf = io.BytesIO()
    pl.DataFrame(schema=SHARD_SCHEMA).write_parquet(buf)
    return pl.read_parquet_metadata(buf.getvalue()).get("ARROW:schema")


def _fits(dtype: pl.DataType, target: pl.DataType, older: bool = False) -> bool:
    """A file column of ``dtype`` reads as ``target``: the same dtype, or null (all-null written as Null)
    where ``target`` has a value, also inside lists and structs.  In a file of an ``older`` schema version a
    struct may lack the fields added at its end since (they read as null; e.g. ``Trial.threads``, version 2)."""
    if dtype == target or isinstance(dtype, pl.Null):
        return True
    if isinstance(dtype, pl.List) and isinstance(target, pl.List):
        return _fits(dtype.inner, target.inner, older)
    if isinstance(dtype, pl.Struct) and isinstance(target, pl.Struct):
        have, want = list(dtype.fields), list(target.fields)
        if not older:
            have = have + [None] * (len(want) - len(have))  # type: ignore[list-item]
        return len(have) <= len(want) and all(
            f is not None and f.name == g.name and _fits(f.dtype, g.dtype, older) for f, g in zip(have, want)
        )
    return False


def _version(path: Path, meta: dict[str, str]) -> int:
    """The :data:`METADATA_KEY` entry of a file's key-value metadata ``meta``.

    Raises:
        ShardError: the entry is missing (the file is not a record shard) or not an integer.
    """
    raw = meta.get(METADATA_KEY)
    if raw is None:
        raise ShardError(f"{path}: not a record shard (a Parquet file without the {METADATA_KEY!r} metadata "
                         f"that every shard carries)")
    try:
        return int(raw)
    except ValueError:
        raise ShardError(f"{path}: {METADATA_KEY!r} is {raw!r} in the Parquet key-value metadata, not a "
                         f"schema version") from None


def _check_footer(path: Path) -> None:
    """One shard's Parquet footer: schema version and column dtypes (see :func:`check_shards`)."""
    try:
        meta = pl.read_parquet_metadata(path)
    except READ_ERRORS as exc:
        raise ShardError(f"{path}: not a Parquet record shard (damaged footer: {first_line(exc)}); "
                         f"{move_away(path)}") from exc
    try:
        version = _version(path, meta)
    except ShardError as exc:
        raise ShardError(f"{exc}; {move_away(path)}") from None
    if version > SCHEMA_VERSION:
        raise ShardError(f"{path}: record schema version {version} is newer than this kit's ({SCHEMA_VERSION}): "
                         f"written by a newer mkb? Read the run with that version, or {move_away(path)}")
    if version < 1:
        raise ShardError(f"{path}: record schema version {version} does not exist (versions start at 1); "
                         f"{move_away(path)}")
    arrow_schema = meta.get("ARROW:schema")
    if arrow_schema is not None and arrow_schema == _written_arrow_schema():
        return  # written with exactly SHARD_SCHEMA: the usual case, no schema read needed
    try:
        schema = pl.read_parquet_schema(path)
    except READ_ERRORS as exc:
        raise ShardError(f"{path}: not a Parquet record shard (unreadable schema: {first_line(exc)}); "
                         f"{move_away(path)}") from exc
    if "job_id" not in schema:
        raise ShardError(f"{path}: not a record shard (no job_id column); {move_away(path)}")
    bad = [f"{name} is {dtype}, expected {SHARD_SCHEMA[name]}" for name, dtype in schema.items()
           if name in SHARD_SCHEMA and not _fits(dtype, SHARD_SCHEMA[name], older=version < SCHEMA_VERSION)]
    if bad:
        raise ShardError(f"{path}: column types differ from the record schema ({'; '.join(bad)}); "
                         f"{move_away(path)}")


def check_shards(paths: Iterable[Path]) -> None:
    """Check every shard file of ``paths``: a whole Parquet file (magic bytes at both ends), whose footer
    carries a known ``mkb.schema_version`` (1 up to :data:`~kit.results.records.SCHEMA_VERSION`; older shards stay
    readable, a newer one is refused) and, for the columns it has, the dtypes of :data:`SHARD_SCHEMA`
    (missing columns read as null, extra ones are ignored).

    Cost: two 4-byte reads and one footer read per file; a file whose ``ARROW:schema`` entry is not the
    one this Polars writes for :data:`SHARD_SCHEMA` (an older version's shard) takes a second, slower
    schema read.  Damage inside the data pages is not seen here (see :func:`kit.results.shards.collect`).

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
            raise ShardError(f"{path}: not a Parquet record shard (truncated or another file); "
                             f"{move_away(path)}")
        _check_footer(path)


def read_schema_version(path: Path) -> int:
    """The ``mkb.schema_version`` key-value metadata of a shard or results file.

    Raises:
        ShardError: the file has no such entry, or it is not an integer.
    """
    return _version(path, pl.read_parquet_metadata(path))
