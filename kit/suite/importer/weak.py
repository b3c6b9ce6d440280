"""Weak imported tasks: those where a zero, constant or identity kernel passes verification (audit step 3).

An imported task keeps the problem's own inputs (fidelity), so some are weak: positive-only inputs where an
identity passes a ReLU, a constant output, a tolerance wider than the output's spread.  After
``mkb tasks audit --dir DIR`` on an imported suite, :func:`mark_weak` writes each task's passing mutants into
``DIR/manifest.json`` (``tasks[].weak``, empty when strong; ``n_weak``) — marked, never silently scored as
strong.  :func:`split_failures` tells the audit's failures caused only by that from real ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

#: the audit's wording of a passing mutant (kit.suite.audit.audit_task)
_MUTANT = "output passes verification"


def weak_reasons(problems: str) -> list[str]:
    """The mutant kinds named in one audit row's ``problems`` ("the zero output passes ..." -> "zero")."""
    out = []
    for p in filter(None, (x.strip() for x in problems.split(" | "))):
        if _MUTANT in p:
            out.append(p.split(": the ", 1)[-1].split(f" {_MUTANT}")[0])
    return out


def _only_weak(problems: str) -> bool:
    parts = [x.strip() for x in problems.split(" | ") if x.strip()]
    return bool(parts) and all(_MUTANT in p for p in parts)


def is_imported(tasks_dir: Path) -> bool:
    path = Path(tasks_dir) / "manifest.json"
    if not path.is_file():
        return False
    return json.loads(path.read_text(encoding="utf-8")).get("suite") == "imported"


def mark_weak(tasks_dir: Path, df: pl.DataFrame) -> int:
    """Write ``weak`` (list of passing mutants) for every audited task into the manifest; returns how many
    are weak.  Tasks not in ``df`` keep their mark.  The manifest is replaced atomically."""
    path = Path(tasks_dir) / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    rows = {r["task_id"]: r for r in df.iter_rows(named=True)}
    for entry in manifest.get("tasks", []):
        if entry["id"] in rows:
            entry["weak"] = weak_reasons(rows[entry["id"]]["problems"] or "")
    manifest["n_weak"] = sum(1 for e in manifest.get("tasks", []) if e.get("weak"))
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    tmp.rename(path)
    return manifest["n_weak"]


def split_failures(bad: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(real failures, weak-only failures) of :func:`kit.suite.audit.failed`'s list."""
    weak = [(t, p) for t, p in bad if _only_weak(p)]
    return [(t, p) for t, p in bad if not _only_weak(p)], weak
