"""Import KernelBench-format problem files and ONNX models as task folders (``mkb tasks import``).

``import_sources(srcs, out, opts)`` finds the sources (:func:`find_sources`: a ``.py`` problem file, a
``.onnx`` model, a folder of them whose name may be a category, or a folder of category folders), builds
each one's task in a staging folder (:func:`kit.suite.importer.assemble.build_task`) and moves it into
``out/<category>/<id>`` only when it is complete; a source that cannot become a task is *left out* with its
kind and reason.  Each source's outcome is appended to ``out/import.jsonl`` as it finishes (``resume=True``
skips the sources recorded there).  At the end the train/test split is assigned (stratified by category,
seeded; :func:`kit.suite.builtin.assign_splits`) and ``out/manifest.json`` is written (temp file, then rename): the
built-in suite's manifest fields plus each task's ``source``, and ``left_out``.  Then ``mkb tasks audit``
marks weak tasks (:mod:`kit.suite.importer.weak`).  Details: docs/import.md.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from kit.suite.builtin import SPLIT_SEED, assign_splits, test_quota
from kit.suite.importer.assemble import Options, Source, build_task, category_of, dumps_task
from kit.suite.importer.problem import ImportFailure
from kit.suite.spec import OPSET
from kit.suite.tasks import load_task, sha256_file

#: test tasks per imported task (the built-in suite's 40 of 190)
TEST_FRACTION = 40 / 190
LOG = "import.jsonl"


@dataclass
class ImportReport:
    imported: list[str] = field(default_factory=list)
    #: (source name, kind, reason)
    left_out: list[tuple[str, str, str]] = field(default_factory=list)


def find_sources(paths: list[Path], upstream: Callable[[Path], str] | None = None) -> list[Source]:
    """The sources under ``paths`` in order (see the module docstring).

    Raises:
        ImportFailure: ``bad_file`` for a path that does not exist or is neither .py, .onnx nor a folder.
    """
    out: list[Source] = []

    def add(f: Path, name: str, cat: str | None) -> None:
        out.append(Source(f, name, cat, upstream(f) if upstream else ""))

    for p in paths:
        if p.is_file() and p.suffix in (".py", ".onnx"):
            add(p, p.name, category_of(p.parent.name))
        elif p.is_dir():
            files = sorted(f for f in p.iterdir() if f.is_file() and f.suffix in (".py", ".onnx")
                           and not f.name.startswith("_"))
            for f in files:
                add(f, f"{p.name}/{f.name}", category_of(p.name))
            for sub in sorted(d for d in p.iterdir() if d.is_dir() and not d.name.startswith((".", "_"))):
                for f in sorted(sub.glob("*.py")) + sorted(sub.glob("*.onnx")):
                    add(f, f"{sub.name}/{f.name}", category_of(sub.name))
        elif not p.exists():
            raise ImportFailure("bad_file", f"{p}: no such file or folder")
        else:
            raise ImportFailure("bad_file", f"{p}: not a .py problem file, an .onnx model or a folder")
    return out


def _read_log(out: Path) -> dict[str, dict]:
    path = out / LOG
    if not path.is_file():
        return {}
    return {e["source"]: e for e in (json.loads(line) for line in path.read_text().splitlines() if line.strip())}


def _log(out: Path, entry: dict) -> None:
    with open(out / LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


def _import_one(src: Source, opts: Options, out: Path, seen: dict[str, str], lock: threading.Lock) -> dict:
    """Build one source's task in a staging folder under ``out`` and move it in (under ``lock``)."""
    with tempfile.TemporaryDirectory(prefix="mkb-import-", dir=out) as tmp:
        try:
            built = build_task(src, opts, Path(tmp))
        except ImportFailure as exc:
            entry = {"source": src.name, "ok": False, "kind": exc.kind, "reason": str(exc)}
        else:
            tid = built.task.id
            with lock:
                if tid in seen:
                    entry = {"source": src.name, "ok": False, "kind": "duplicate_id",
                             "reason": f"task id {tid!r} is also {seen[tid]}'s (use --id-prefix)"}
                else:
                    dest = out / built.task.category / tid
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    if dest.exists():  # left by an interrupted run that did not log it
                        shutil.rmtree(dest)
                    built.folder.rename(dest)
                    seen[tid] = src.name
                    entry = {"source": src.name, "ok": True, "id": tid, "category": built.task.category}
    with lock:
        _log(out, entry)
    return entry


def import_sources(sources: list[Source], out: Path, opts: Options, *,
                   skip: Literal["none", "recorded", "imported"] = "none", jobs: int = 1,
                   n_test: int | None = None, progress: Callable[[str, int, int], None] | None = None) -> ImportReport:
    """Import ``sources`` into ``out`` (see the module docstring); returns what was imported and left out.

    ``skip``: the sources not built again: ``recorded``, every source ``out/import.jsonl`` records (a resume);
    ``imported``, those it records as imported (a retry of the ones left out); ``none``, a fresh import.
    ``jobs``: sources built at once (each export is its own process).  ``n_test``: test tasks of the split
    (default: round(TEST_FRACTION * imported), 40 for 190).

    Raises:
        ImportFailure: ``out`` exists, is not empty and ``skip`` is ``none`` (kind ``bad_file``).
    """
    out.mkdir(parents=True, exist_ok=True)
    if skip == "none" and any(out.iterdir()):
        raise ImportFailure("bad_file", f"{out}: not empty (give an empty or new folder, or --resume)")
    done = _read_log(out) if skip != "none" else {}
    if skip == "imported":
        done = {k: e for k, e in done.items() if e.get("ok")}
    seen = {e["id"]: e["source"] for e in done.values() if e.get("ok")}
    todo = [s for s in sources if s.name not in done]
    lock = threading.Lock()
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        futures = [pool.submit(_import_one, s, opts, out, seen, lock) for s in todo]
        for k, fut in enumerate(as_completed(futures), len(sources) - len(todo) + 1):
            entry = fut.result()
            done[entry["source"]] = entry
            if progress is not None:
                progress(entry["source"], k, len(sources))
    entries = [done[s.name] for s in sources if s.name in done]
    report = ImportReport([e["id"] for e in entries if e["ok"]],
                          [(e["source"], e["kind"], e["reason"]) for e in entries if not e["ok"]])
    write_manifest(out, entries, n_test)
    return report


def write_manifest(out: Path, entries: list[dict], n_test: int | None = None) -> Path:
    """Assign the split, rewrite each task.toml's ``split`` and write ``out/manifest.json`` atomically."""
    tasks = [load_task(out / e["category"] / e["id"]) for e in entries if e["ok"]]
    n = round(TEST_FRACTION * len(tasks)) if n_test is None else n_test
    splits = assign_splits(tasks, SPLIT_SEED, n) if tasks else {}
    rows = []
    for t in tasks:
        if t.split != splits[t.id]:
            t = t.model_copy(update={"split": splits[t.id]})
            (t.path / "task.toml").write_text(dumps_task(t), encoding="utf-8")
        rows.append({"id": t.id, "category": t.category, "op_type": t.op_type, "mechanism": t.mechanism,
                     "split": t.split, "native_converts": t.source.native_converts if t.source else None,
                     "source": t.source.file if t.source else "", "upstream": t.source.upstream if t.source else "",
                     "files": {f: sha256_file(t.path / f) for f in ("task.toml", "model.py", "model.onnx")}})
    manifest = {"suite": "imported", "opset": OPSET, "n_tasks": len(rows),
                "split": {"seed": SPLIT_SEED, "n_test": n, "method": "stratified by category, largest-remainder "
                          "quotas (kit.suite.builtin.assign_splits); the paper's own split is not published",
                          "test_per_category": test_quota(tasks, n) if tasks else {}},
                "tasks": rows,
                "left_out": [{"source": e["source"], "kind": e["kind"], "reason": e["reason"]}
                             for e in entries if not e["ok"]]}
    tmp = out / "manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    tmp.rename(out / "manifest.json")
    return out / "manifest.json"


__all__ = ["ImportReport", "Options", "Source", "find_sources", "import_sources", "write_manifest"]
