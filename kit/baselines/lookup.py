"""Finding the native measurement of a task in the baseline table of a key, or why there is none.

:func:`find` returns the newest entry of the task in the table of exactly this key (hardware fingerprint, MNN
version, flags digest) whose task digest is the task's; otherwise it raises :class:`NoBaseline` naming the
first reason of these: the task's files changed since the table measured it, the table has no entry for the
task, the tables of this hardware and MNN version have other build flags or runner settings (which ones), the
tables of this hardware are of another MNN version, there is no table of this hardware (the fingerprints that
have one are named), or no table at all.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from kit.baselines.key import BaselineKey
from kit.baselines.table import (
    Entry as Entry,  # re-exported: what find returns
)
from kit.baselines.table import (
    entries,
    read_all,
    read_table,
    table_path,
)

#: the parts of a flags digest a miss names when they differ (table column -> how the message names it)
FLAG_PARTS = {"native_key": "native build key (tree, compiler, CMake arguments, runner, target)",
              "threads": "timing.threads", "precision": "timing.precision", "warmup": "timing.warmup",
              "iterations": "timing.iterations"}

#: what a refusal tells the user to do
_FIX = ("time natively interleaved to fill it (baselines.native_timing = \"interleaved\", or mkb calibrate) on this "
        "machine with this configuration")


class NoBaseline(Exception):
    """No table entry matches (the message says why, naming the key, task or setting)."""


def find(root: Path, key: BaselineKey, task_id: str, task_sha256: str) -> Entry:
    """The newest entry of ``task_id`` with digest ``task_sha256`` in the table of ``key`` under ``root``.

    Raises:
        NoBaseline: none matches (module docstring: the reason named).
        kit.baselines.table.TableError: a table file is damaged."""
    df = read_table(table_path(root, key.key))
    if df.height:
        mine = df.filter(pl.col("task_id") == task_id)
        hit = mine.filter(pl.col("task_sha256") == task_sha256).sort("recorded_at", descending=True)
        if hit.height:
            return entries(hit.head(1))[0]
        if mine.height:
            old = mine.sort("recorded_at", descending=True)["task_sha256"][0]
            raise NoBaseline(f"task {task_id}: its files changed since baseline table {key.key} measured it "
                             f"(task sha256 {old[:12]} there, {task_sha256[:12]} now); {_FIX}")
        raise NoBaseline(f"task {task_id}: baseline table {key.key} ({key.describe()['hardware']}) has no entry for "
                         f"it; {_FIX}")
    raise NoBaseline(f"task {task_id}: {_why_no_table(root, key)}; {_FIX}")


def _why_no_table(root: Path, key: BaselineKey) -> str:
    """Why no table of ``key`` exists under ``root``, from the tables that do."""
    here = key.describe()
    metas = read_all(root).unique("key", keep="first")
    if metas.height == 0:
        return f"no baseline table under {root}"
    same_hw = metas.filter(pl.col("fingerprint_id") == key.fingerprint_id)
    if same_hw.height == 0:
        others = "; ".join(f"{r['fingerprint_id']} ({r['hardware']})" for r in metas.iter_rows(named=True))
        return (f"no baseline table for this hardware, fingerprint {key.fingerprint_id} ({here['hardware']}); "
                f"tables exist for other fingerprints: {others}")
    same_mnn = same_hw.filter(pl.col("mnn_version") == key.mnn_version)
    if same_mnn.height == 0:
        versions = sorted(set(same_hw["mnn_version"].to_list()))
        return (f"the baseline tables of this hardware ({key.fingerprint_id}) are of MNN {', '.join(versions)}, "
                f"not {key.mnn_version}")
    diffs = []
    for r in same_mnn.iter_rows(named=True):
        parts = [f"{name} {r[col]} there, {here[col]} here" for col, name in FLAG_PARTS.items() if r[col] != here[col]]
        diffs.append(f"table {r['key']} (flags digest {r['flags_digest']}): " + ", ".join(parts))
    return (f"the baseline tables of this hardware ({key.fingerprint_id}) and MNN {key.mnn_version} have other "
            f"build flags or runner settings than this run's (flags digest {key.flags_digest}): " + "; ".join(diffs))
