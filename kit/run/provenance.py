"""A run's ``provenance.json``: what produced its records (config digest, MNN tree, compiler, CPU, threads).

A run directory can be filled by several sessions (a killed run resumed, nodes that changed between them).
The file keeps the first session's values at the top level (what the report shows), lists every session
under ``sessions`` (its :data:`SESSION_KEYS`, start time and dispatch), and names under ``differs`` each key
whose value changed between sessions, with the value of each session — timings taken on two CPU models
are then not silently reported as one.

The file is read into a :class:`Provenance` (:func:`load`), one :class:`Session` per session.  Every field
is optional (a file of an older kit lacks the newer ones) and a key the models do not name is kept as it is
and written back unchanged; a key the file lacks is not written either, so what :func:`save` writes has the
keys and nesting the kit has always written.
"""

from __future__ import annotations

import json
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from kit.host.machine import cpu_model, fingerprint
from kit.host.versions import kit_facts, onnxruntime_version

if TYPE_CHECKING:
    from kit.job.worker import Worker
    from kit.settings.config import EvalConfig

from kit.run.provenance_model import (  # noqa: F401 - the models are read as kit.run.provenance.<name>
    _FIX,
    ENTRY_KEYS,
    EXTRA_SELECTIONS,
    FACT_KEYS,
    FILE,
    SESSION_KEYS,
    BaselineTable,
    ContainerFacts,
    Dispatch,
    HostFacts,
    KitFacts,
    Provenance,
    ProvenanceError,
    Session,
    TaskSelection,
    TimingNode,
)


def collect(cfg: EvalConfig, worker: Worker | None) -> Session:
    """This session's provenance on this node: :data:`SESSION_KEYS`, ``started_at``, the task selection, the
    whole config and :data:`FACT_KEYS`; ``mnn_tree_digest``, ``compiler`` and ``build_flags`` come from
    ``worker``'s native build ("unknown" without a worker), ``baselines`` from its table (None without)."""
    from kit.mnn.native import native_meta

    meta = native_meta(worker.native) if worker else {}
    return Session.model_validate({
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
    } | _generation(cfg))


def _generation(cfg: EvalConfig) -> dict[str, object]:
    """``{"generation": ...}``, the model whose answers are evaluated (a ``[generate]`` section), else nothing."""
    if cfg.generate is None:
        return {}
    from kit.generate.batch import (
        generation_facts,  # the openai client is imported only by runs that generate
    )

    return {"generation": generation_facts(cfg)}


def parse(text: str) -> Provenance:
    """The provenance in ``text`` (a ``provenance.json``).

    Raises:
        ValueError: not JSON, not an object, or a key of the wrong type (the message says which key).
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object")
    sessions = data.get("sessions")
    if sessions is not None and not (isinstance(sessions, list) and all(isinstance(x, dict) for x in sessions)):
        raise ValueError(f"'sessions' must be a list of objects, got {json.dumps(sessions)[:80]}")
    if not isinstance(data.get("differs", {}), dict):
        raise ValueError("'differs' must be an object")
    try:
        return Provenance.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{where!r}: {first['msg']}, got {json.dumps(first['input'], default=str)[:80]}") from exc


def load(run_dir: Path) -> Provenance | None:
    """``run_dir/provenance.json``, or None when absent.

    Raises:
        ProvenanceError: the file is damaged (:func:`parse`; the message names the file).
    """
    path = run_dir / FILE
    if not path.is_file():
        return None
    try:
        return parse(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ProvenanceError(f"{path}: {exc}{_FIX}") from exc


def merge(previous: Provenance | None, current: Session) -> Provenance:
    """The run's provenance with session ``current`` added to ``previous`` (the file as the session found
    it; None for a new run).  The first session's values stay at the top level; ``sessions`` gets
    ``current``'s entry; ``differs`` maps each :data:`SESSION_KEYS` key whose value is not the same in
    every session that recorded it to the list of values, one per session (None: not recorded)."""
    if previous is None:
        return Provenance.model_validate(current.dump() | {"sessions": [current.entry().dump()]})
    # a file from before sessions were kept: its top level is its one session
    sessions = [*(previous.sessions or [previous.entry()]), current.entry()]
    out = previous.dump() | {"sessions": [s.dump() for s in sessions]}
    # a key a session did not record (an older kit) is not a difference
    differs = {
        k: [s.fact(k) for s in sessions]
        for k in SESSION_KEYS
        if len({json.dumps(s.fact(k), sort_keys=True) for s in sessions if s.fact(k) is not None}) > 1
    }
    if differs:
        out["differs"] = differs
    else:
        out.pop("differs", None)
    return Provenance.model_validate(out)


def selection(cfg: EvalConfig) -> TaskSelection:
    """The task selection of ``cfg``: ``tasks.split``, ``tasks.ids`` and ``tasks.dir`` made absolute."""
    return TaskSelection(split=cfg.tasks.split, ids=list(cfg.tasks.ids), dir=str(Path(cfg.tasks.dir).resolve()))


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
    if any(k.split == current.split and k.ids == current.ids for k in prov.selections() or []):
        return
    prov.task_selections = [*(prov.task_selections or []), current]
    _write(run_dir, prov)


def note_source(run_dir: Path, method: str, path: Path) -> None:
    """Add the candidate source ``method`` (a JSONL file at ``path``) to the config ``run_dir/provenance.json``
    keeps, when it has no source of that method yet: the candidates ``mkb serve`` received, which a bundle
    carries as it does a configured source.  Nothing to do without the file.

    Raises:
        ProvenanceError: the file is damaged."""
    prov = load(run_dir)
    if prov is None or prov.config is None:
        return
    sources = prov.config.setdefault("candidates", {}).setdefault("sources", [])
    if any(s.get("method") == method for s in sources):
        return
    sources.append({"method": method, "path": str(Path(path).resolve())})
    _write(run_dir, prov)


def task_selections(prov: Provenance | None) -> list[TaskSelection] | None:
    """:meth:`Provenance.selections` of :func:`load`'s result (None for no file)."""
    return prov.selections() if prov is not None else None


def save(run_dir: Path, previous: Provenance | None, current: Session) -> Provenance:
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
        self.current: Session | None = None

    @property
    def started(self) -> bool:
        return self.current is not None

    def start(self, facts: Session, dispatch: Dispatch | None = None) -> None:
        """Record the session (once; later calls are ignored): ``facts`` and, when given, ``dispatch``
        (with an empty ``timing_workers`` list)."""
        if self.current is not None:
            return
        self.current = facts.model_copy(deep=True)
        if dispatch is not None:
            self.current.dispatch = dispatch.model_copy(update={"timing_workers": []}, deep=True)
        save(self.run_dir, self.before, self.current)

    def timing_worker(self, info: TimingNode) -> None:
        """Add a timing worker (``name``, ``host``, ``arch``, ``cpu_model``) to the session's dispatch."""
        if self.current is None or self.current.dispatch is None:
            return
        timers = self.current.dispatch.timing_workers
        if not timers:
            self.current.build_cpu_model = self.current.cpu_model
            self.current.build_arch = self.current.arch
            self.current.cpu_model, self.current.arch = info.cpu_model, info.arch
        timers.append(info)
        save(self.run_dir, self.before, self.current)


def _write(run_dir: Path, prov: Provenance) -> None:
    path = run_dir / FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(prov.dump(), indent=1, default=str))
    tmp.replace(path)
