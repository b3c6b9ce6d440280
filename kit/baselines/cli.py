"""``mkb baselines list`` and ``mkb baselines show KEY``: the baseline tables of this machine's kit cache.

    mkb baselines list [--fingerprint ID|TEXT] [--dir DIR | --config cfg.toml]
    mkb baselines show KEY [--dir DIR | --config cfg.toml]

``list`` prints one row per table (key, hardware fingerprint, MNN version, flags digest, runner settings, tasks,
entries, when last written); ``--fingerprint`` keeps the tables whose fingerprint id starts with, or whose
hardware in words contains, the text (case-insensitive).  ``show`` prints a table's key (a unique prefix is
enough) and per task its newest native time, the spread of its measurements and when they were taken.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import polars as pl
from rich.console import Console
from rich.table import Table

from kit.baselines import table as btable
from kit.baselines.drift import between_run
from kit.score import betweenrun

#: the columns of ``mkb baselines list`` (table column -> heading)
LIST_COLUMNS = {"key": "key", "hardware": "fingerprint", "fingerprint_id": "fingerprint id", "mnn_version": "MNN",
                "flags_digest": "flags digest", "threads": "threads", "precision": "precision", "tasks": "tasks",
                "entries": "entries", "last_recorded_at": "when"}


class BaselinesUsageError(Exception):
    """A key that names no table or several (the message says which)."""


def add_parser(sub) -> None:  # noqa: ANN001 - argparse's private subparsers type
    """``mkb baselines`` and its two commands."""
    p = sub.add_parser("baselines", help="the baseline tables: native op times per hardware fingerprint")
    bsub = p.add_subparsers(dest="baselines_cmd", required=True)
    for name, text in (("list", "one row per table"), ("show", "one table's tasks and native times")):
        q = bsub.add_parser(name, help=text)
        if name == "show":
            q.add_argument("key", help="the table's key (a unique prefix is enough)")
        else:
            q.add_argument("--fingerprint", default=None, help="only tables whose fingerprint id starts with, or "
                                                               "whose hardware contains, this text")
        where = q.add_mutually_exclusive_group()
        where.add_argument("--dir", type=Path, default=None, help="the tables' folder (default: the kit cache's)")
        where.add_argument("--config", type=Path, default=None, help="a config: its baselines.dir or mnn.cache_dir")


def tables_dir(args: argparse.Namespace) -> Path:
    """``--dir``; else the folder of ``--config`` (``baselines.dir``, else ``<mnn.cache_dir>/baselines``); else
    the default cache's.

    Raises:
        kit.settings.config.ConfigError: the config is invalid."""
    from kit.settings.config import DEFAULT_CACHE_DIR, load_config

    if args.dir is not None:
        return args.dir
    if args.config is not None:
        cfg = load_config(args.config)
        return cfg.baselines.dir or cfg.mnn.cache_dir / "baselines"
    return DEFAULT_CACHE_DIR / "baselines"


def listed(root: Path, fingerprint: str | None = None) -> pl.DataFrame:
    """:func:`kit.baselines.table.summary` of ``root``, filtered by ``fingerprint`` (module docstring)."""
    df = btable.summary(root)
    if fingerprint:
        text = fingerprint.lower()
        df = df.filter(pl.col("fingerprint_id").str.starts_with(text)
                       | pl.col("hardware").str.to_lowercase().str.contains(text, literal=True))
    return df


def resolve_key(root: Path, prefix: str) -> Path:
    """The table file whose key starts with ``prefix``.

    Raises:
        BaselinesUsageError: none or several do."""
    hits = [p for p in btable.table_files(root) if p.stem.startswith(prefix)]
    if len(hits) != 1:
        known = ", ".join(p.stem for p in btable.table_files(root)) or "none"
        what = "no baseline table" if not hits else f"{len(hits)} baseline tables"
        raise BaselinesUsageError(f"{what} under {root} with a key starting {prefix!r} (tables: {known})")
    return hits[0]


def task_rows(df: pl.DataFrame) -> pl.DataFrame:
    """Per task and task digest of a table's rows: the newest ``native_ms``, the measurements' count, min and
    max (ms), the newest ``recorded_at`` and the op types."""
    newest = pl.col("recorded_at").arg_max()
    return (df.group_by(["task_id", "task_sha256"])
            .agg(native_ms=pl.col("native_ms").get(newest), entries=pl.len(), min_ms=pl.col("native_ms").min(),
                 max_ms=pl.col("native_ms").max(), last_recorded_at=pl.col("recorded_at").max(),
                 op_types=pl.col("native_op_types").get(newest))
            .sort(["task_id", "last_recorded_at"]))


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    """``mkb baselines list|show``: print, return 0.

    Raises:
        BaselinesUsageError: ``show`` of an unknown or ambiguous key.
        kit.baselines.table.TableError: a damaged table file."""
    console = console or Console(width=200)
    root = tables_dir(args)
    if args.baselines_cmd == "list":
        df = listed(root, args.fingerprint)
        out = Table(title=f"{df.height} baseline table(s) under {root}"
                    + (f" (fingerprint {args.fingerprint!r})" if args.fingerprint else ""))
        for heading in LIST_COLUMNS.values():
            out.add_column(heading)
        for r in df.iter_rows(named=True):
            out.add_row(*(str(r[c]) if c != "last_recorded_at" else r[c][:19].replace("T", " ") for c in LIST_COLUMNS))
        console.print(out)
        return 0
    df = btable.read_table(resolve_key(root, args.key))
    head = df.row(0, named=True)
    console.print(f"baseline table {head['key']} ({root})\n  fingerprint {head['fingerprint_id']}: "
                  f"{head['hardware']} {json.loads(head['fingerprint'])}\n  MNN {head['mnn_version']}, flags digest "
                  f"{head['flags_digest']} (native build {head['native_key']}, threads {head['threads']}, precision "
                  f"{head['precision']}, warmup {head['warmup']}, iterations {head['iterations']})")
    out = Table(title=f"{df['task_id'].n_unique()} task(s), {df.height} measurement(s)")
    for heading in ("task", "task sha256", "native ms (newest)", "entries", "min ms", "max ms", "when", "op types"):
        out.add_column(heading)
    for r in task_rows(df).iter_rows(named=True):
        out.add_row(r["task_id"], r["task_sha256"][:12], f"{r['native_ms']:.6g}", str(r["entries"]),
                    f"{r['min_ms']:.6g}", f"{r['max_ms']:.6g}", r["last_recorded_at"], r["op_types"])
    console.print(out)
    # what a table-timed speedup's interval is widened by (docs/scoring.md, "What an interval covers")
    console.print(f"native times {betweenrun.estimate_line(between_run(df)).replace('speedup', 'native time')}",
                  highlight=False)
    return 0
