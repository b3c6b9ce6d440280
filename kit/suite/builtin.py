"""The MobileKernelBench task suite as Python data, and the generator of ``tasks/``.

``all_defs()`` lists the 190 :class:`~kit.suite.spec.TaskDef` (95 ONNX operators, 12 categories);
``generate(tasks_dir)`` writes ``<category>/<task_id>/{task.toml, model.py, model.onnx}``,
``manifest.json`` and ``README.md``.  The output depends only on this package (constants are drawn
from generators seeded with task ids; the train/test split from :data:`SPLIT_SEED`).
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import numpy as np

from kit.suite import defs_elementwise, defs_nn, defs_tensor, defs_window
from kit.suite.mnn_targets import target_for
from kit.suite.nativemarks import carry_marks
from kit.suite.spec import OPSET, TaskDef, build_onnx, probe_outputs, render_model_py
from kit.suite.tasks import CATEGORIES, sha256_file
from kit.suite.tomlw import dumps_task

#: seed of the stratified train/test split (recorded in manifest.json)
SPLIT_SEED = 20250916
N_TEST = 40

#: paper Table 3: category -> (minimum number of operators, number of tasks)
TABLE3: dict[str, tuple[int, int]] = {
    "unary": (11, 11),
    "binary": (7, 8),
    "trigonometry": (12, 12),
    "activation": (6, 12),
    "normalization": (3, 12),
    "pooling": (4, 15),
    "convolution": (2, 21),
    "matrix": (4, 19),
    "reduction": (10, 35),
    "tensor": (19, 28),
    "logic": (11, 13),
    "others": (4, 4),
}
N_OPS = 95


def all_defs() -> list[TaskDef]:
    """Every task definition, in category order (raises ValueError on a duplicate id)."""
    defs = defs_elementwise.all_defs() + defs_nn.all_defs() + defs_window.all_defs() + defs_tensor.all_defs()
    order = {c: i for i, c in enumerate(CATEGORIES)}
    defs.sort(key=lambda d: order[d.category])
    ids = Counter(d.id for d in defs)
    dup = [i for i, n in ids.items() if n > 1]
    if dup:
        raise ValueError(f"duplicate task ids: {dup}")
    return defs


def test_quota(defs: list[TaskDef], n_test: int = N_TEST) -> dict[str, int]:
    """Number of test tasks per category: ``n_test`` spread by largest remainder, proportional to size.

    ``defs``: anything with ``.category`` (built-in definitions, imported tasks)."""
    sizes = Counter(d.category for d in defs)
    total = sum(sizes.values())
    n_test = min(n_test, total)
    quota = {c: n_test * sizes[c] / total for c in CATEGORIES}
    counts = {c: int(q) for c, q in quota.items()}
    rest = n_test - sum(counts.values())
    for c in sorted(CATEGORIES, key=lambda c: (-(quota[c] - counts[c]), CATEGORIES.index(c)))[:rest]:
        counts[c] += 1
    return counts


def assign_splits(defs: list[TaskDef], seed: int = SPLIT_SEED, n_test: int = N_TEST) -> dict[str, str]:
    """task id -> "train"/"test", stratified by category (see :func:`test_quota`); ``defs``: anything with
    ``.id`` and ``.category``."""
    counts = test_quota(defs, n_test)
    rng = np.random.Generator(np.random.PCG64(seed))
    split: dict[str, str] = {}
    for c in CATEGORIES:
        ids = sorted(d.id for d in defs if d.category == c)
        test = set(rng.permutation(len(ids))[: counts[c]].tolist())
        for k, tid in enumerate(ids):
            split[tid] = "test" if k in test else "train"
    return split


def _description(td: TaskDef, mechanism: str) -> str:
    parts = [td.summary.rstrip(".") + "."]
    if td.tol_method == "derived":  # the note's words on a hand-set tolerance no longer hold; task.toml says how
        if td.note and "atol" not in td.note:
            parts.append(td.note.rstrip(".") + ".")
        return " ".join(parts)
    if td.note:
        parts.append(td.note.rstrip(".") + ".")
    if (td.atol, td.rtol) != (1e-4, 1e-4) and "atol" not in td.note:
        parts.append(f"Tolerance atol={td.atol:g}, rtol={td.rtol:g}.")
    return " ".join(parts)


def apply_tolerances(defs: list[TaskDef], record: dict[str, dict] | None = None) -> None:
    """Set the derived tolerances of ``record`` (default: ``kit/suite/tolerances.toml``,
    :func:`kit.suite.tolerance.load_record`) on the definitions it names, in place."""
    from kit.suite.tolerance import load_record

    record = load_record() if record is None else record
    for td in defs:
        rec = record.get(td.id)
        if rec is not None:
            td.atol, td.rtol, td.tol_reason = float(rec["atol"]), float(rec["rtol"]), str(rec["reason"])
            td.tol_method, td.tol_k = "derived", int(rec["accumulation_length"])


def task_files(td: TaskDef, split: str) -> dict[str, bytes]:
    """The three files of one task folder: name -> content."""
    shapes = probe_outputs(td)
    model = build_onnx(td, shapes)
    tgt = target_for(td)
    desc = _description(td, tgt.mechanism)
    toml = dumps_task(td, split=split, description=desc, shapes=shapes, target=tgt, model=model)
    return {
        "task.toml": toml.encode(),
        "model.py": render_model_py(td, shapes, desc).encode(),
        "model.onnx": model.SerializeToString(),
    }


def generate(tasks_dir: Path, ids: list[str] | None = None) -> None:
    """Write every task folder, ``manifest.json`` and ``README.md`` under ``tasks_dir`` (deterministic).

    Existing category folders are replaced; other files in ``tasks_dir`` (e.g. calibration.csv) stay, and so do
    the audit's marks of the tasks whose files are unchanged (:func:`kit.suite.nativemarks.carry_marks`).
    ``ids`` restricts the folders written (the manifest is then not rewritten); for tests and debugging.
    """
    tasks_dir = Path(tasks_dir)
    tasks_dir.mkdir(parents=True, exist_ok=True)
    defs = all_defs()
    apply_tolerances(defs)
    splits = assign_splits(defs)
    if ids is None:
        for c in CATEGORIES:
            if (tasks_dir / c).is_dir():
                shutil.rmtree(tasks_dir / c)
    entries = []
    for td in defs:
        if ids is not None and td.id not in ids:
            continue
        folder = tasks_dir / td.category / td.id
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in task_files(td, splits[td.id]).items():
            (folder / name).write_bytes(data)
        tgt = target_for(td)
        entries.append(
            {
                "id": td.id,
                "category": td.category,
                "op_type": td.op,
                "mechanism": tgt.mechanism,
                "split": splits[td.id],
                "files": {n: sha256_file(folder / n) for n in ("task.toml", "model.py", "model.onnx")},
            }
        )
    if ids is not None:
        return
    old_path = tasks_dir / "manifest.json"
    carry_marks(json.loads(old_path.read_text(encoding="utf-8")) if old_path.is_file() else {}, entries)
    manifest = {
        "suite": "MobileKernelBench",
        "opset": OPSET,
        "n_tasks": len(entries),
        "n_ops": len({d.op for d in defs}),
        "split": {"seed": SPLIT_SEED, "method": "stratified by category, largest-remainder quotas",
                  "test_per_category": test_quota(defs)},
        "tasks": entries,
    }
    marked = sum(1 for e in entries if e.get("native_incorrect"))
    if marked:  # the audit's count, kept with its marks
        manifest["n_native_incorrect"] = marked
    (tasks_dir / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    from kit.suite.readme import render_readme

    (tasks_dir / "README.md").write_text(render_readme(defs, splits, SPLIT_SEED, TABLE3), encoding="utf-8")


__all__ = ["N_OPS", "SPLIT_SEED", "TABLE3", "all_defs", "assign_splits", "generate", "test_quota"]
