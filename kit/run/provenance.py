"""A run's ``provenance.json``: what produced its records (config digest, MNN tree, compiler, CPU, threads).

A run directory can be filled by several sessions (a killed run resumed, nodes that changed between them).
The file keeps the first session's values at the top level (what the report shows), lists every session
under ``sessions`` (its :data:`SESSION_KEYS`, start time and dispatch), and names under ``differs`` each key
whose value changed between sessions, with the value of each session — timings taken on two CPU models
are then not silently reported as one.
"""

from __future__ import annotations

import copy
import json
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kit.host.machine import cpu_model, fingerprint
from kit.host.versions import kit_facts, onnxruntime_version

if TYPE_CHECKING:
    from kit.job.worker import Worker
    from kit.settings.config import EvalConfig

FILE = "provenance.json"
#: keys that must agree between the sessions of one run for its numbers to be comparable
SESSION_KEYS: tuple[str, ...] = (
    "config_digest", "mnn_version", "mnn_tree_digest", "engine", "compiler", "build_flags", "cpu_model", "arch",
    "threads", "precision", "python", "container",
)


#: facts kept per session beside :data:`SESSION_KEYS` (the node's :func:`kit.host.machine.fingerprint`, the kit's
#: version and commit, ONNX Runtime's version); a bundle compares them with the reviewer's
FACT_KEYS: tuple[str, ...] = ("host", "kit", "onnxruntime")


#: how to get past a damaged file (said in every ProvenanceError)
_FIX = " (move the file away to go on: the next session writes a new one from its own provenance)"


class ProvenanceError(Exception):
    """``provenance.json`` exists but is not a JSON object (the message names the file)."""


def collect(cfg: EvalConfig, worker: Worker | None) -> dict[str, Any]:
    """This session's provenance on this node: :data:`SESSION_KEYS`, ``started_at`` (ISO-8601 UTC), the
    whole config and :data:`FACT_KEYS`; ``mnn_tree_digest`` and ``compiler`` come from ``worker``'s native
    build ("unknown" without a worker)."""
    from kit.mnn.native import native_meta

    meta = native_meta(worker.native) if worker else {}
    return {
        "config_digest": cfg.digest(),
        "mnn_version": cfg.mnn.version,
        "mnn_tree_digest": meta.get("tree_digest", "unknown"),
        "engine": cfg.mnn.engine,
        "compiler": meta.get("compiler", "unknown"),
        "build_flags": meta.get("build_flags", "unknown"),
        "cpu_model": cpu_model(),
        "arch": platform.machine(),
        "threads": cfg.timing.threads,
        "precision": cfg.timing.precision,
        "python": sys.version.split()[0],
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "tasks": selection(cfg),
        "config": cfg.model_dump(mode="json"),
        # what a bundle's reviewer compares (kit.bundle): the node's fingerprint, the kit and the reference
        "host": fingerprint(),
        "kit": kit_facts(),
        "onnxruntime": onnxruntime_version(),
        # where the commands ran: {"mode": "host"} or the image (kit.images.container.ImageCheck.provenance)
        "container": worker.container.image.provenance() if worker and worker.container else {"mode": "host"},
        # the baseline table of this node (kit.baselines): which one its timings wrote or read
        "baselines": worker.baselines.describe() if worker else None,
    }


def load(run_dir: Path) -> dict[str, Any] | None:
    """``run_dir/provenance.json``, or None when absent.

    Raises:
        ProvenanceError: the file is not valid JSON or not an object.
    """
    path = run_dir / FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ProvenanceError(f"{path}: invalid JSON: {exc}{_FIX}") from exc
    if not isinstance(data, dict):
        raise ProvenanceError(f"{path}: expected a JSON object{_FIX}")
    sessions = data.get("sessions")
    if sessions is not None and not (isinstance(sessions, list) and all(isinstance(x, dict) for x in sessions)):
        raise ProvenanceError(f"{path}: 'sessions' must be a list of objects, got {json.dumps(sessions)[:80]}{_FIX}")
    if not isinstance(data.get("differs", {}), dict):
        raise ProvenanceError(f"{path}: 'differs' must be an object{_FIX}")
    return data


def _session(prov: dict[str, Any]) -> dict[str, Any]:
    keys = (*SESSION_KEYS, "started_at", "build_cpu_model", "build_arch", "dispatch", "tasks", "baselines",
            *FACT_KEYS)
    return {k: copy.deepcopy(prov[k]) for k in keys if k in prov}


def merge(previous: dict[str, Any] | None, current: dict[str, Any]) -> dict[str, Any]:
    """The run's provenance with session ``current`` added to ``previous`` (the file as the session found
    it; None for a new run).  The first session's values stay at the top level; ``sessions`` gets
    ``current``'s entry; ``differs`` maps each :data:`SESSION_KEYS` key whose value is not the same in
    every session that recorded it to the list of values, one per session (None: not recorded)."""
    if previous is None:
        return copy.deepcopy(current) | {"sessions": [_session(current)]}
    out = copy.deepcopy(previous)
    sessions = out.get("sessions") or [_session(previous)]  # a file from before sessions were kept
    sessions.append(_session(current))
    out["sessions"] = sessions
    # a key a session did not record (an older kit) is not a difference
    differs = {
        k: [s.get(k) for s in sessions]
        for k in SESSION_KEYS
        if len({json.dumps(s[k], sort_keys=True) for s in sessions if s.get(k) is not None}) > 1
    }
    if differs:
        out["differs"] = differs
    else:
        out.pop("differs", None)
    return out


def selection(cfg: EvalConfig) -> dict[str, Any]:
    """The task selection of ``cfg``: ``{"split": str, "ids": [str], "dir": absolute tasks.dir}``."""
    return {"split": cfg.tasks.split, "ids": list(cfg.tasks.ids), "dir": str(Path(cfg.tasks.dir).resolve())}


#: top-level key of the selections of sessions that ran no job (and so added no session entry)
EXTRA_SELECTIONS = "task_selections"


def note_selection(run_dir: Path, cfg: EvalConfig) -> None:
    """Add ``cfg``'s task selection to ``run_dir/provenance.json`` when no session there has it yet (a
    session that ran no job, e.g. a resumed run with more ``tasks.ids``, adds no session entry but its
    ``mkb eval`` scored over those tasks).  Nothing to do without the file (no session ran a job).

    Raises:
        ProvenanceError: the file is damaged."""
    prov = load(run_dir)
    if prov is None:
        return
    current = selection(cfg)
    known = task_selections(prov) or []
    if any(k["split"] == current["split"] and k["ids"] == current["ids"] for k in known):
        return
    prov.setdefault(EXTRA_SELECTIONS, []).append(current)
    _write(run_dir, prov)


def task_selections(prov: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """The task selection of each session of a run (``{"split": str, "ids": [str]}`` and, when recorded,
    ``"dir"``: what ``tasks.split``, ``tasks.ids`` and ``tasks.dir`` were, the denominator its ``mkb eval``
    scored against) and of the sessions that ran no job (:func:`note_selection`), from :func:`load`'s
    result; None when not every session recorded one (no file, or a file from an older kit)."""
    if not prov:
        return None
    sessions = prov.get("sessions") or [prov]
    extra = prov.get(EXTRA_SELECTIONS)
    out = []
    entries = [s.get("tasks") for s in sessions] + (extra if isinstance(extra, list) else [])
    for i, sel in enumerate(entries):
        if sel is None and i == 0:  # a first session from before sessions kept it: the top-level config
            sel = (prov.get("config") or {}).get("tasks") if isinstance(prov.get("config"), dict) else None
        if not isinstance(sel, dict) or not isinstance(sel.get("split"), str):
            return None
        ids = sel.get("ids") or []
        if not isinstance(ids, list):
            return None
        one = {"split": sel["split"], "ids": [str(i) for i in ids]}
        if isinstance(sel.get("dir"), str):
            one["dir"] = sel["dir"]
        out.append(one)
    return out


def save(run_dir: Path, previous: dict[str, Any] | None, current: dict[str, Any]) -> dict[str, Any]:
    """Write :func:`merge` ``(previous, current)`` to ``run_dir/provenance.json`` (temp file, then rename)
    and return it.  Call it again with the same ``previous`` as ``current`` grows during a session."""
    merged = merge(previous, current)
    _write(run_dir, merged)
    return merged


class SessionLog:
    """This session's entry of a run's ``provenance.json``, saved each time it grows.

    Made when a session is about to run jobs (a session that runs nothing leaves no trace): :meth:`start` with
    the first build worker's facts (:func:`collect`) and, for a Ray run, the dispatch settings; then
    :meth:`timing_worker` for each timing worker's node, whose CPU model becomes the run's ``cpu_model`` (the
    build node's is kept as ``build_cpu_model``), since timings are that CPU's.

    Raises (every method):
        ProvenanceError: the file there is damaged (when the log is made).
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.before = load(run_dir)  # the file as this session found it (a resumed run)
        self.current: dict[str, Any] | None = None

    @property
    def started(self) -> bool:
        return self.current is not None

    def start(self, facts: dict[str, Any], dispatch: dict[str, Any] | None = None) -> None:
        """Record the session (once; later calls are ignored): ``facts`` and, when given, ``dispatch``
        (with an empty ``timing_workers`` list)."""
        if self.current is not None:
            return
        self.current = copy.deepcopy(facts)
        if dispatch is not None:
            self.current["dispatch"] = dict(dispatch) | {"timing_workers": []}
        save(self.run_dir, self.before, self.current)

    def timing_worker(self, info: dict[str, Any]) -> None:
        """Add a timing worker (``name``, ``host``, ``arch``, ``cpu_model``) to the session's dispatch."""
        if self.current is None or "dispatch" not in self.current:
            return
        timers = self.current["dispatch"]["timing_workers"]
        if not timers:
            self.current["build_cpu_model"] = self.current.get("cpu_model")
            self.current["build_arch"] = self.current.get("arch")
            self.current["cpu_model"], self.current["arch"] = info["cpu_model"], info["arch"]
        timers.append(info)
        save(self.run_dir, self.before, self.current)


def _write(run_dir: Path, prov: dict[str, Any]) -> None:
    path = run_dir / FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(prov, indent=1, default=str))
    tmp.replace(path)
