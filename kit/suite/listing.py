"""The suite's ``tasks/manifest.json`` (every task with the sha256 of each of its files and the split), checked against
the task folders, and the listing of ``mkb tasks list``."""

from __future__ import annotations

import json
from pathlib import Path

from kit.suite.tasks import CATEGORIES, Task, TaskError, TensorSpec, load_suite, sha256_file


def read_manifest(tasks_dir: Path) -> dict:
    path = tasks_dir / "manifest.json"
    if not path.is_file():
        raise TaskError(f"{path}: missing")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise TaskError(f"{path}: invalid JSON: {exc}") from exc


def list_tasks(tasks_dir: Path, split: str = "all", category: str | None = None) -> list[dict]:
    """Rows for ``mkb tasks list``: one dict per task, sorted by category order then id.

    Keys: id, category, op_type, mechanism, split, inputs (``"x:float32[8,64,56,56]"`` joined by
    spaces), outputs (same form), atol, rtol, mnn_op_types (space-joined).

    Raises:
        TaskError: as :func:`load_suite`, or an unknown ``category``.
    """
    if category is not None and category not in CATEGORIES:
        raise TaskError(f"category: unknown category {category!r} (known: {', '.join(CATEGORIES)})")
    order = {c: i for i, c in enumerate(CATEGORIES)}
    tasks = [t for t in load_suite(tasks_dir, split=split) if category is None or t.category == category]
    tasks.sort(key=lambda t: (order[t.category], t.id))

    def specs(items: list[TensorSpec]) -> str:
        return " ".join(f"{s.name}:{s.dtype}[{','.join(str(d) for d in s.shape)}]" for s in items)

    return [
        {
            "id": t.id,
            "category": t.category,
            "op_type": t.op_type,
            "mechanism": t.mechanism,
            "split": t.split,
            "inputs": specs(t.inputs),
            "outputs": specs(t.outputs),
            "atol": t.tolerance.atol,
            "rtol": t.tolerance.rtol,
            "mnn_op_types": " ".join(t.mnn_op_types),
        }
        for t in tasks
    ]


def _listing_problems(e: dict, t: Task) -> list[str]:
    """How task ``t`` disagrees with its manifest entry ``e`` (fields, then the sha256 of every listed file)."""
    problems = []
    for key, value in (("category", t.category), ("op_type", t.op_type), ("mechanism", t.mechanism),
                       ("split", t.split)):
        if e.get(key) != value:
            problems.append(f"{t.id}: manifest {key}={e.get(key)!r}, task.toml says {value!r}")
    assert t.path is not None
    for name, digest in e.get("files", {}).items():
        f = t.path / name
        if not f.is_file():
            problems.append(f"{t.id}: {name} missing")
        elif sha256_file(f) != digest:
            problems.append(f"{t.id}: {name} sha256 differs from manifest.json")
    return problems


def check_manifest(tasks_dir: Path) -> list[str]:
    """Problems between ``manifest.json`` and the task folders (empty when they agree).

    Checks that every task folder is listed and vice versa, that category/op_type/mechanism/split agree
    with task.toml, and the sha256 of every listed file.
    """
    manifest = read_manifest(tasks_dir)
    problems: list[str] = []
    listed = {e["id"]: e for e in manifest.get("tasks", [])}
    found = {t.id: t for t in load_suite(tasks_dir)}
    for tid in sorted(set(found) - set(listed)):
        problems.append(f"{tid}: task folder not in manifest.json")
    for tid in sorted(set(listed) - set(found)):
        problems.append(f"{tid}: in manifest.json but no task folder")
    for tid in sorted(set(listed) & set(found)):
        problems += _listing_problems(listed[tid], found[tid])
    return problems


def check_selected(tasks_dir: Path, tasks: list[Task]) -> bool:
    """Check the tasks a run will use against ``tasks_dir/manifest.json`` before anything runs: a task folder
    edited since the manifest was written (a model, its inputs or tolerance changed) would give numbers that
    are not the suite's.  Hashing the 190 built-in tasks' files (7 MB) took 0.2 s here.  Returns False when the
    folder has no manifest (a suite of one's own: nothing to check against).

    Raises:
        TaskError: a selected task is not listed, or disagrees with its entry; every problem is named.
    """
    if not (tasks_dir / "manifest.json").is_file():
        return False
    listed = {e["id"]: e for e in read_manifest(tasks_dir).get("tasks", [])}
    problems = []
    for t in tasks:
        problems += _listing_problems(listed[t.id], t) if t.id in listed else [f"{t.id}: not in manifest.json"]
    if problems:
        raise TaskError(f"{tasks_dir / 'manifest.json'}: the task folders were changed since it was written: "
                        + "; ".join(problems[:10]) + (f" (+{len(problems) - 10} more)" if len(problems) > 10 else ""))
    return True
