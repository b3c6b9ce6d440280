"""The audit's marks of tasks the pinned native build computes wrongly, kept in the suite's ``manifest.json``.

``mkb tasks audit --config CFG`` runs every task on the pinned tree's native build (:mod:`kit.outline.taskaudit`)
and writes, per audited task, ``tasks[].native_incorrect`` into the manifest: absent when native agreed with ONNX
Runtime, else ``{"mismatch": <why>, "mnn_version": <version>}``; and ``tasks[].native_edges_failed``, the edge
sets (:mod:`kit.suite.edges`) native fails (absent: none).  ``n_native_incorrect`` counts the marked tasks.  The
scores read the marks (:func:`read_marks`): a marked task counts for CSR and FCR but not for fast_p unless
``report.score_native_incorrect`` (:mod:`kit.score.metrics`).  A mark is a fact of the audit, not of the task's
files: :func:`kit.suite.listing.check_manifest` ignores it, and :func:`carry_marks` keeps it when the suite is
generated again with the same files.
"""

from __future__ import annotations

import json
from pathlib import Path

#: manifest entry keys the audit writes (never part of what generation writes)
MARK_KEYS: tuple[str, ...] = ("native_incorrect", "native_edges_failed", "weak")


def _manifest(tasks_dir: Path) -> Path:
    return Path(tasks_dir) / "manifest.json"


def read_marks(tasks_dir: Path) -> dict[str, str]:
    """Task id → the mismatch of every task marked ``native_incorrect`` in ``tasks_dir/manifest.json`` (empty
    when the folder has no manifest).

    Raises:
        ValueError: the manifest is not JSON (names the file).
    """
    path = _manifest(tasks_dir)
    if not path.is_file():
        return {}
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: invalid JSON: {exc}") from None
    return {e["id"]: str(e["native_incorrect"].get("mismatch", "")) for e in manifest.get("tasks", [])
            if isinstance(e.get("native_incorrect"), dict)}


def write_marks(tasks_dir: Path, verdicts: dict[str, tuple[str, list[str]]], mnn_version: str) -> int:
    """Write the marks of the audited tasks into ``tasks_dir/manifest.json`` (replaced atomically); returns how
    many tasks are marked ``native_incorrect`` now.

    ``verdicts``: task id → (mismatch, "" when native agreed; the edge sets native fails).  Tasks not in it keep
    their marks.

    Raises:
        FileNotFoundError: the folder has no manifest.
    """
    path = _manifest(tasks_dir)
    manifest = json.loads(path.read_text(encoding="utf-8"))
    for entry in manifest.get("tasks", []):
        if entry["id"] not in verdicts:
            continue
        mismatch, edges_failed = verdicts[entry["id"]]
        entry.pop("native_incorrect", None)
        entry.pop("native_edges_failed", None)
        if mismatch:
            entry["native_incorrect"] = {"mismatch": mismatch, "mnn_version": mnn_version}
        if edges_failed:
            entry["native_edges_failed"] = sorted(edges_failed)
    manifest["n_native_incorrect"] = sum(1 for e in manifest.get("tasks", []) if e.get("native_incorrect"))
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    tmp.rename(path)
    return manifest["n_native_incorrect"]


def carry_marks(old: dict, entries: list[dict]) -> None:
    """Copy the audit's marks (:data:`MARK_KEYS`) of ``old`` (a manifest) onto the new ``entries`` whose files'
    sha256 are unchanged (a changed task needs a new audit); ``n_native_incorrect`` is the caller's to set."""
    before = {e["id"]: e for e in old.get("tasks", [])}
    for entry in entries:
        prev = before.get(entry["id"])
        if prev is not None and prev.get("files") == entry.get("files"):
            entry.update({k: prev[k] for k in MARK_KEYS if k in prev})


def without_marks(manifest: dict) -> dict:
    """``manifest`` without the audit's marks (what generation writes), for comparing two manifests."""
    out = {k: v for k, v in manifest.items() if k not in ("n_native_incorrect", "n_weak")}
    out["tasks"] = [{k: v for k, v in e.items() if k not in MARK_KEYS} for e in manifest.get("tasks", [])]
    return out
