"""``mkb bundle RUN_DIR``: one archive with everything a reviewer needs to check and re-run a run (layout:
:mod:`kit.bundle.manifest`).

What goes in: the run's records (deduplicated, as the report scores them), its provenance and calibration,
the metrics computed from the records, the candidate sources of every method (only the samples of recorded
tasks, bytes unchanged, so that a job's id computed from them is the recorded one), and the task folders of
the run's denominator, checked against the suite's ``manifest.json`` first.  Candidates of the ``native``
method are not copied: they are the MNN tree's own files (its digest is in the manifest).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from kit.bundle import scores
from kit.bundle.archive import write_archive
from kit.bundle.manifest import (
    BUNDLE_FORMAT,
    CALIBRATION,
    CANDIDATES,
    METRICS,
    PROVENANCE,
    RECORDS,
    ROOT,
    TASKS,
    BundleError,
    Manifest,
    SourceEntry,
    TaskEntry,
    file_hashes,
    folder_hashes,
    write_manifest,
)
from kit.host.versions import kit_facts
from kit.report.data import load_records
from kit.results import shards
from kit.results.records import SCHEMA_VERSION
from kit.run import provenance
from kit.run.provenance import Provenance
from kit.score import metrics
from kit.suite.listing import check_selected
from kit.suite.tasks import Task, load_suite, sha256_file

#: the archive ``mkb bundle`` writes without ``--out`` (inside the run directory)
DEFAULT_NAME = "bundle.tar.gz"


def make_bundle(run_dir: Path, out: Path | None = None, tasks_dir: Path | None = None) -> Path:
    """Bundle ``run_dir`` into ``out`` (default ``run_dir/bundle.tar.gz``; ``.zip``: a zip) and return it.

    ``tasks_dir``: the suite the run was scored on (default: the one its provenance recorded).

    Raises:
        BundleError: no provenance or records of one config digest, a candidate source or the tasks folder
            gone.
        kit.suite.tasks.TaskError: a task folder changed since the suite's manifest.json was written.
        kit.report.ReportError: the run's records cannot be read, or its task selection is not in the suite.
    """
    prov = provenance.load(run_dir)
    if prov is None or prov.config is None:
        raise BundleError(f"{run_dir}: no provenance.json with a config (not a run directory of mkb eval)")
    records = load_records(run_dir)
    digest = prov.config_digest
    found = sorted(set(records["config_digest"].to_list()))
    if found != [digest]:
        raise BundleError(f"{run_dir}: records of config digest(s) {found}, provenance.json says {digest!r}")
    suite_dir = _suite_dir(prov, tasks_dir)
    suite = load_suite(suite_dir, "all")
    has_manifest = check_selected(suite_dir, suite)
    denominator = scores.denominator(run_dir, records, metrics.tasks_frame(suite))
    config = prov.config
    with tempfile.TemporaryDirectory(prefix="mkb-bundle-") as tmp:
        root = Path(tmp) / ROOT
        root.mkdir()
        shards.write_parquet_atomic(records, root / RECORDS)
        shutil.copy2(run_dir / PROVENANCE, root / PROVENANCE)
        if (run_dir / CALIBRATION).is_file():
            shutil.copy2(run_dir / CALIBRATION, root / CALIBRATION)
        figures = scores.compute(records, denominator, scores.noise_of(run_dir, records), config["report"]["fast_p"])
        (root / METRICS).write_text(json.dumps(figures, indent=1) + "\n")
        links: dict[str, str] = {}
        sources = [copy_source(s, records, root, links) for s in config["candidates"]["sources"]]
        tasks = _copy_tasks([t for t in suite if t.id in set(denominator["task_id"].to_list())], root)
        manifest = Manifest(
            bundle_format=BUNDLE_FORMAT, created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            kit=(prov.kit.dump() if prov.kit is not None else {}) or {"version": None, "commit": None, "dirty": None},
            bundled_by=kit_facts(),
            config=config, config_digest=digest, record_schema_version=SCHEMA_VERSION, n_records=records.height,
            tasks=tasks, tasks_manifest_sha256=sha256_file(suite_dir / "manifest.json") if has_manifest else None,
            sources=sources, environment=environment(prov, records), hosts=session_hosts(prov, records),
            files=file_hashes(root), links=links)
        write_manifest(root, manifest)
        return write_archive(root, out or run_dir / DEFAULT_NAME)


def _suite_dir(prov: Provenance, given: Path | None) -> Path:
    """``given``, else the first recorded tasks folder that exists (each session's, then the config's).

    Raises:
        BundleError: none is a folder (names the paths tried)."""
    if given is not None:
        tried = [given]
    else:
        tried = [Path(d) for d in dict.fromkeys([*prov.recorded_task_dirs(), prov.config_tasks_dir()]) if d]
    for d in tried:
        if d.is_dir():
            return d
    raise BundleError(f"tasks: {', '.join(map(str, tried)) or 'no folder recorded'} is not a folder (the suite the "
                      f"run was scored on; pass --tasks-dir DIR)")


def copy_source(src: dict[str, Any], records: pl.DataFrame, root: Path, links: dict[str, str]) -> SourceEntry:
    """Copy the samples of method ``src["method"]`` whose task has a record (bytes unchanged) into ``root``;
    a candidate file that is a symbolic link goes into ``links`` (bundle path -> its text) instead.

    Raises:
        BundleError: the source is gone."""
    method, path = src["method"], Path(src["path"])
    if method in (".", ".."):
        raise BundleError(f"candidates.sources: method name {method!r} cannot name a folder")
    ids = set(records.filter(pl.col("method") == method)["task_id"].to_list())
    if path.is_dir():
        dest = root / CANDIDATES / method
        dest.mkdir(parents=True)
        for tid in sorted(ids):
            if (path / tid).is_dir():
                shutil.copytree(path / tid, dest / tid, symlinks=True)
                _take_links(dest / tid, root, links)
        return SourceEntry(method=method, kind="dir", path=f"{CANDIDATES}/{method}", original_path=str(path))
    if path.is_file():
        dest = root / CANDIDATES / f"{method}.jsonl"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(b"".join(line + b"\n" for line in path.read_bytes().split(b"\n") if _line_task(line) in ids))
        return SourceEntry(method=method, kind="jsonl", path=f"{CANDIDATES}/{method}.jsonl", original_path=str(path))
    raise BundleError(f"candidates.sources: {path} (method {method!r}) no longer exists: the bundle must carry "
                      f"the candidates its records were made from")


def _take_links(folder: Path, root: Path, links: dict[str, str]) -> None:
    """Record every symbolic link under ``folder`` (a copied candidate) in ``links`` and remove it."""
    for p in sorted([folder, *folder.rglob("*")]):
        if p.is_symlink():
            links[p.relative_to(root).as_posix()] = os.readlink(p)
            p.unlink()


def _line_task(line: bytes) -> str | None:
    """The ``task_id`` of a JSONL candidate line (decoded as the loader does), None for a blank line."""
    text = line.decode("utf-8", "surrogateescape").strip()
    if not text:
        return None
    obj = json.loads(text)  # the run read every line: each is a JSON object with a task_id
    return obj.get("task_id") if isinstance(obj, dict) else None


def _copy_tasks(tasks: list[Task], root: Path) -> dict[str, TaskEntry]:
    out = {}
    for t in tasks:
        assert t.path is not None
        dest = root / TASKS / t.category / t.id
        shutil.copytree(t.path, dest, ignore=shutil.ignore_patterns("__pycache__"))
        out[t.id] = TaskEntry(category=t.category, split=t.split, files=folder_hashes(dest))
    return out


def environment(prov: Provenance, records: pl.DataFrame) -> dict[str, Any]:
    """What the run ran with (manifest ``environment``), from its provenance; ``image_digest``: the image id
    the run's commands ran in (provenance ``container.image_id``, else the records' ``image_id`` column;
    several ids: their sorted list), None where they ran on the host."""
    image = (prov.container.image_id if prov.container is not None else None) or None
    if image is None and "image_id" in records.columns:
        found = [d for d in records["image_id"].unique().to_list() if d]
        image = found[0] if len(found) == 1 else (sorted(found) or None)
    return {
        "mnn_version": prov.mnn_version, "mnn_tree_digest": prov.mnn_tree_digest, "engine": prov.engine,
        "compiler": prov.compiler, "onnxruntime": prov.onnxruntime, "python": prov.python, "image_digest": image,
    }


def session_hosts(prov: Provenance, records: pl.DataFrame) -> list[dict[str, Any]]:
    """One fingerprint per session: its ``host`` (:func:`kit.host.machine.fingerprint`) with the model and
    architecture of the CPU that timed it; a session of an older kit without ``host`` gets those two and the
    governor its records name."""
    governors = sorted({g for g in records["cpu_governor"].to_list() if g})
    out = []
    for s in prov.all_sessions():
        host = (s.host.dump() if s.host is not None else {}) or {"governor": ",".join(governors)}
        host.update({k: v for k, v in (("cpu_model", s.cpu_model), ("arch", s.arch)) if v is not None})
        out.append(host)
    return out
