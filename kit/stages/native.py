"""The native baseline's share of a job: each task converted by the native converter, and the native libraries'
dynamic symbols, each made once per worker and kept.

A job's screen compares the candidate's libraries' symbols with the native ones' (:func:`kit.stages.screen.
check_library`); its timing runs the task's native model beside the candidate's.  Both depend only on the
native build, so a worker reads them once: symbols in memory, models on disk in the native build's model
folder (shared by the workers of a node; a task native MNN cannot convert leaves a ``.failed`` file with the
converter's reason, so no worker tries again).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kit.results.outcomes import StageFailure
from kit.stages import screen
from kit.stages import verify as sverify
from kit.stages.verify import Side, VerifyOptions
from kit.suite.tasks import Task, sha256_file


@dataclass
class NativeModels:
    """Tasks converted by the native converter (``side``), kept in ``folder``.

    A model is ``<task id>-<sha256 of the ONNX file, 16 hex>.mnn`` (two suites may share a task id with
    different models); a failed conversion is the same stem with ``.failed`` holding the converter's reason.
    ``worker``: the name in a conversion's temporary file (two workers of a node may convert one task at once;
    the first ``replace`` wins, both files are the same)."""

    folder: Path
    side: Side
    verify: VerifyOptions
    worker: str = "w0"
    _models: dict[str, Path | None] = field(default_factory=dict)
    _errors: dict[str, str] = field(default_factory=dict)
    _edges: dict[str, dict[str, bool]] = field(default_factory=dict)

    def model(self, task: Task) -> Path | None:
        """The ``.mnn`` file of ``task`` converted by native MNN, or None when native cannot convert it
        (:meth:`error` says why)."""
        if task.id in self._models:
            return self._models[task.id]
        stem = f"{task.id}-{sha256_file(task.onnx_path)[:16]}"
        out, failed = self.folder / f"{stem}.mnn", self.folder / f"{stem}.failed"
        model: Path | None = None
        if out.is_file():
            model = out
        elif failed.is_file():
            self._errors[task.id] = failed.read_text()
        else:
            tmp = self.folder / f"{stem}.{self.worker}.tmp.mnn"
            try:
                sverify.convert(task, self.side, tmp, self.verify)
                tmp.replace(out)
                model = out
            except StageFailure as exc:
                failed.write_text(exc.message)
                self._errors[task.id] = exc.message
                tmp.unlink(missing_ok=True)
        self._models[task.id] = model
        return model

    def edge_verdicts(self, task: Task, runner: Path, scratch: Path) -> dict[str, bool]:
        """Edge set name → whether native MNN's outputs match ONNX Runtime on it (:func:`kit.stages.verify.
        run_edges` on the native model, ``runner`` running a side without its own); empty when the task declares
        no set or native cannot convert it.  Run once per task and worker."""
        if task.id not in self._edges:
            model = self.model(task) if task.edges else None
            verdicts: dict[str, bool] = {}
            if model is not None:
                try:
                    sets = sverify.run_edges(task, model, self.side, runner, scratch, self.verify)
                    verdicts = {e.name: e.ok for e in sets}
                except StageFailure:  # native's own conduct: no verdict on a set
                    verdicts = {}
            self._edges[task.id] = verdicts
        return self._edges[task.id]

    def error(self, task: Task) -> str:
        """Why native MNN cannot convert ``task`` ("" when it can, or before :meth:`model` was asked)."""
        return self._errors.get(task.id, "")


@dataclass
class NativeSymbols:
    """The dynamic symbols of native libraries, read once per path."""

    _read: dict[Path, screen.Symbols] = field(default_factory=dict)

    def of(self, library: Path) -> screen.Symbols:
        """The symbols of ``library`` (empty for a library the native build has not: everything a candidate's
        library of that name has then counts as added).

        Raises:
            ValueError: ``library`` exists but is not an ELF file."""
        if library not in self._read:
            empty = screen.Symbols(frozenset(), frozenset())
            self._read[library] = screen.read_symbols(library) if library.is_file() else empty
        return self._read[library]
