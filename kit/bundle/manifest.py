"""A bundle's layout and its ``manifest.json``: what was run, with what, on what, and the sha256 of every file.

A bundle is one archive (:mod:`kit.bundle.archive`) whose single top folder :data:`ROOT` holds::

    manifest.json          this module's :class:`Manifest`
    provenance.json        the run's provenance (kit.run.provenance), every session
    results.parquet        the run's records, deduplicated (kit.results.shards), one per job
    metrics.json           kit.score.metrics.summary per method, as the bundle computed it (kit.bundle.scores)
    calibration.json       the run's A/A noise floor, when the run directory had one
    candidates/<method>/   a directory source: the task folders of its recorded samples, bytes unchanged
    candidates/<method>.jsonl   a JSONL source: its lines of recorded tasks, bytes unchanged
    tasks/<category>/<id>/ every task the run was scored over (its denominator)

The hashes are integrity, not authorship: whoever edits a file can write a new manifest.  What a consistent
forger cannot hide is checked from the content itself (:mod:`kit.bundle.validate`): every job's id is
computed again from the bundled candidates and config, and the metrics from the records.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from kit.settings.base import StrictModel
from kit.suite.tasks import sha256_file

#: version of this layout; a reader refuses another
BUNDLE_FORMAT = 1
#: the archive's top folder
ROOT = "mkb-bundle"
MANIFEST = "manifest.json"
PROVENANCE = "provenance.json"
RECORDS = "results.parquet"
METRICS = "metrics.json"
CALIBRATION = "calibration.json"
CANDIDATES = "candidates"
TASKS = "tasks"


class BundleError(Exception):
    """A bundle cannot be made (the run directory lacks what it needs) or read (not an archive of this format);
    the message names the file."""


class TaskEntry(StrictModel):
    """One task of the bundle: where it lies under ``tasks/`` and the sha256 of each of its files."""

    category: str
    split: str
    #: path inside the task folder (POSIX) -> sha256 (hex)
    files: dict[str, str]


class SourceEntry(StrictModel):
    """One method's candidates: ``path`` inside the bundle (``candidates/<method>`` or ``.jsonl``)."""

    method: str
    kind: Literal["dir", "jsonl"]
    path: str
    #: where the run read them (for the reader's information only)
    original_path: str


class Manifest(StrictModel):
    """``manifest.json`` (module docstring).  Versions and digests are what the run's provenance recorded;
    ``bundled_by`` is the kit that made the bundle."""

    bundle_format: int
    created_at: str
    #: the kit that ran the evaluation (``version``, ``commit``, ``dirty``; null where not recorded)
    kit: dict[str, Any]
    bundled_by: dict[str, Any]
    #: the run's config (``EvalConfig.model_dump(mode="json")``) and its digest
    config: dict[str, Any]
    config_digest: str
    record_schema_version: int
    n_records: int
    #: the run's denominator: task id -> entry
    tasks: dict[str, TaskEntry]
    #: sha256 of the suite's ``manifest.json`` the tasks were checked against (null: the suite has none)
    tasks_manifest_sha256: str | None
    sources: list[SourceEntry]
    #: ``mnn_version``, ``mnn_tree_digest``, ``engine``, ``compiler``, ``onnxruntime``, ``python``,
    #: ``image_digest`` (null: not run inside an image)
    environment: dict[str, Any]
    #: one :func:`kit.host.machine.fingerprint` per session of the run (its timing CPU's model and architecture)
    hosts: list[dict[str, Any]] = Field(min_length=1)
    #: every file of the bundle but ``manifest.json``: path (POSIX, relative to the bundle's root) -> sha256
    files: dict[str, str]
    #: candidate files that are symbolic links (the sample set's ``reject_symlink``): bundle path -> the link's
    #: text.  Not stored as links (a bundle holds regular files only); :func:`restore_links` makes them again
    #: after the hashes are checked.  The kit refuses a candidate file that is a link without reading it
    links: dict[str, str] = Field(default_factory=dict)


def file_hashes(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (``manifest.json`` at its top excluded), by POSIX relative path.

    Raises:
        BundleError: an entry is a symbolic link or not a regular file (names it).
    """
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink() or not (path.is_dir() or path.is_file()):
            raise BundleError(f"{path}: a bundle holds regular files only (a link or special file)")
        if path.is_file() and rel != MANIFEST:
            out[rel] = sha256_file(path)
    return out


def folder_hashes(folder: Path) -> dict[str, str]:
    """sha256 of every file of a task folder (``__pycache__`` left out), by POSIX path inside it."""
    return {k: v for k, v in file_hashes(folder).items() if "__pycache__" not in k.split("/")}


def bytes_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_manifest(root: Path, manifest: Manifest) -> Path:
    path = root / MANIFEST
    path.write_text(json.dumps(manifest.model_dump(mode="json"), indent=1, sort_keys=True) + "\n")
    return path


def read_manifest(root: Path) -> Manifest:
    """``root/manifest.json`` as a :class:`Manifest`.

    Raises:
        BundleError: missing, not JSON, a field missing or of the wrong type, or another bundle format."""
    path = root / MANIFEST
    if not path.is_file():
        raise BundleError(f"{MANIFEST}: missing (not a bundle made by mkb bundle)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BundleError(f"{MANIFEST}: not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise BundleError(f"{MANIFEST}: expected a JSON object")
    if data.get("bundle_format") != BUNDLE_FORMAT:
        raise BundleError(f"{MANIFEST}: bundle_format {data.get('bundle_format')!r}, this kit reads {BUNDLE_FORMAT}")
    try:
        return Manifest.model_validate(data)
    except ValueError as exc:
        raise BundleError(f"{MANIFEST}: {exc}") from exc


def restore_links(root: Path, links: dict[str, str]) -> None:
    """Make the candidate links of a manifest again under ``root`` (see :attr:`Manifest.links`).

    Raises:
        BundleError: a link outside ``candidates/``, where a file is already, or whose target would leave the
            bundle's ``candidates/`` folder (names it)."""
    top = (root / "candidates").resolve()
    for rel, target in sorted(links.items()):
        where = root / rel
        if not rel.startswith("candidates/") or ".." in Path(rel).parts or where.exists() or where.is_symlink():
            raise BundleError(f"{MANIFEST}: links: {rel!r} is not a new path under candidates/")
        lands = (where.parent / target).resolve()
        if Path(target).is_absolute() or not lands.is_relative_to(top):
            raise BundleError(f"{MANIFEST}: links: {rel!r} -> {target!r} leaves the bundle's candidates/")
        where.parent.mkdir(parents=True, exist_ok=True)
        where.symlink_to(target)
