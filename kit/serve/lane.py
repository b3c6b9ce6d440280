"""A lane of ``mkb serve``: one run directory the service writes, with the config (and so the config digest) of
its records.  The service has one lane for checks with timing (the config as given: ``run.dir``) and, once a
check asks for correctness only, one for those (``timing.enabled = false``: another digest, so another run
directory, ``<run.dir>-no-timing``; a run directory holds the records of one digest, :mod:`kit.run.rundir`).

A lane's run directory is an ``mkb eval`` run directory: records in its shards, one per accepted check, written
as each finishes; ``provenance.json`` with this session; so ``mkb report`` and ``mkb bundle`` work on it.  Beside
them the **journal** (``serve-journal.jsonl``): one line per accepted check that has to run (its request, no
path), appended and fsynced before the check is acknowledged.  A restarted service reads the finished checks
from the shards and runs again the journal's checks that have no record yet (:meth:`Lane.unfinished`).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kit.results.records import Record
from kit.results.shards import RecordSink, read_records
from kit.run import provenance as prov
from kit.run.rundir import prepare as prepare_run_dir
from kit.run.rundir import release as release_run_dir
from kit.settings.config import EvalConfig

JOURNAL_FILE = "serve-journal.jsonl"
#: the candidates of the recorded checks, one JSONL candidate source per method (``<method>.jsonl``)
SOURCES_DIR = "serve-candidates"
#: the suffix of the run directory of correctness-only checks
NO_TIMING_SUFFIX = "-no-timing"


def no_timing_config(cfg: EvalConfig) -> EvalConfig:
    """``cfg`` with ``timing.enabled = false`` and ``run.dir`` + :data:`NO_TIMING_SUFFIX`."""
    run = cfg.run.model_copy(update={"dir": cfg.run.dir.with_name(cfg.run.dir.name + NO_TIMING_SUFFIX)})
    timing = cfg.timing.model_copy(update={"enabled": False})
    return cfg.model_copy(update={"run": run, "timing": timing})


@dataclass(frozen=True)
class JournalEntry:
    """A journal line: an accepted check that has to run (``id``: its job id), as it was asked for."""

    id: str
    task_id: str
    method: str
    sample_id: str
    files: dict[str, str] | None
    response: str | None

    def line(self) -> str:
        return json.dumps(self.__dict__, separators=(",", ":")) + "\n"

    def source_line(self) -> str:
        """The check's candidate as a line of a JSONL candidate source (:mod:`kit.candidates.sources`)."""
        given = {"files": self.files} if self.files is not None else {"response": self.response}
        return json.dumps({"task_id": self.task_id, "sample_id": self.sample_id} | given) + "\n"


def read_journal(path: Path, method: str | None = None) -> list[JournalEntry]:
    """The entries of the journal at ``path`` (none when it does not exist); a line cut short by a kill (the
    last one) is skipped: its check was never acknowledged.  ``method``: read a source of received candidates
    (lines without ``id`` nor ``method``) as entries of that method."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="surrogateescape").splitlines():
        try:
            fields = json.loads(line)
            if method is not None:
                fields = {"id": "", "method": method, "files": None, "response": None} | fields
            out.append(JournalEntry(**fields))
        except (ValueError, TypeError):
            continue
    return out


class Lane:
    """One run directory of the service (module docstring), opened (checked and locked as ``mkb eval`` does)
    by the constructor.

    Raises:
        kit.settings.config.ConfigError: the run directory holds another config's records or another process
            evaluates into it (:func:`kit.run.rundir.prepare`).
        kit.results.shards.ShardError: a shard there cannot be read."""

    def __init__(self, cfg: EvalConfig) -> None:
        self.cfg = cfg
        self.digest = cfg.digest()
        self.timing = cfg.timing.enabled
        self.run_dir = prepare_run_dir(cfg)
        self._lock = threading.Lock()
        self._sink = RecordSink(self.run_dir)
        self._notes = prov.SessionLog(self.run_dir)
        self._journal = self.run_dir / JOURNAL_FILE
        #: checks finished since the journal was last rewritten (:meth:`compact`)
        self.finished_since_compact = 0
        self._kept = self._kept_samples()

    def records(self) -> dict[str, Record]:
        """The records already in the run directory (deduplicated as scoring does), by job id."""
        frame = read_records(self.run_dir)
        return {row["job_id"]: Record.model_validate(row) for row in frame.iter_rows(named=True)}

    def unfinished(self, recorded: set[str]) -> list[JournalEntry]:
        """The journal's checks whose id is not in ``recorded`` (each once); the journal is rewritten to hold
        only them."""
        pending: dict[str, JournalEntry] = {}
        for e in read_journal(self._journal):
            if e.id not in recorded:
                pending.setdefault(e.id, e)
        self.compact(list(pending.values()))
        return list(pending.values())

    def compact(self, pending: list[JournalEntry]) -> None:
        """Rewrite the journal to hold only ``pending`` (the checks accepted and not finished; the caller keeps
        new ones from being accepted meanwhile), atomically."""
        with self._lock:
            tmp = self._journal.with_name(JOURNAL_FILE + ".tmp")
            with open(tmp, "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write("".join(e.line() for e in pending))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self._journal)
            self.finished_since_compact = 0

    def accept(self, entry: JournalEntry) -> None:
        """Append ``entry`` to the journal and fsync it (before the check is acknowledged)."""
        with self._lock, open(self._journal, "a", encoding="utf-8", errors="surrogateescape") as f:
            f.write(entry.line())
            f.flush()
            os.fsync(f.fileno())

    def start_session(self, facts: Callable[[EvalConfig], prov.Session], dispatch: prov.Dispatch | None = None) -> None:
        """Note this session in ``provenance.json`` (once; ``facts(cfg)``: the session under ``cfg`` on the first
        build worker's node, whose native build they name; ``dispatch``: the Ray workers', None in this process),
        the config's task selection, and the sources of the candidates received so far.  The session's config has
        no candidate source of its own: the service evaluates only what it receives."""
        sessions_cfg = self.cfg.model_copy(update={"candidates": self.cfg.candidates.model_copy(update={"sources": []})})
        with self._lock:
            self._notes.start(facts(sessions_cfg), dispatch)
            prov.note_selection(self.run_dir, self.cfg)
            for path in sorted((self.run_dir / SOURCES_DIR).glob("*.jsonl")):
                prov.note_source(self.run_dir, path.stem, path)

    def write(self, worker: str, rec: Record, entry: JournalEntry) -> None:
        """Write ``rec`` to the shard of ``worker`` (one file per record: a kill never loses a written one), then
        its candidate (``entry``) to its method's source, once per sample: a bundle of the run carries it."""
        with self._lock:
            self._sink.append(worker, rec)
            key = (entry.method, entry.task_id, entry.sample_id)
            if key in self._kept:
                return
            path = self.run_dir / SOURCES_DIR / f"{entry.method}.jsonl"
            path.parent.mkdir(exist_ok=True)
            new = not path.exists()
            with open(path, "a", encoding="utf-8", errors="surrogateescape") as f:
                f.write(entry.source_line())
                f.flush()
                os.fsync(f.fileno())
            self._kept.add(key)
            if new and self._notes.started:
                prov.note_source(self.run_dir, entry.method, path)

    def _kept_samples(self) -> set[tuple[str, str, str]]:
        """(method, task id, sample id) of every candidate in the run directory's sources of received ones."""
        out = set()
        for path in (self.run_dir / SOURCES_DIR).glob("*.jsonl"):
            for e in read_journal(path, path.stem):
                out.add((path.stem, e.task_id, e.sample_id))
        return out

    def close(self) -> None:
        """Flush the shards and let go of the run directory's lock."""
        with self._lock:
            self._sink.close()
        release_run_dir(self.run_dir)
