"""``mkb tasks audit --config CFG``: the task audit, with every task also run on the pinned tree's native build.

The audit of :mod:`kit.suite.audit` checks each task with ONNX Runtime, PyTorch and the PyPI ``mnn`` wheel; the
wheel is another MNN than the one the kit times (3.6.1 against the pinned 3.2.2), so a task whose pinned native
kernel is wrong would pass it.  With a config (its ``[mnn]``: the pinned tree, the cache), :func:`pinned_rows`
converts and runs every task on the native build a worker sets up (:func:`kit.job.worker.setup_worker`), as the
pipeline's native side does: the native converter (:class:`kit.stages.native.NativeModels`), then the
verification trials of ``[verify]`` (:func:`kit.stages.verify.verify`) and the task's edge sets
(:func:`kit.stages.verify.run_edges`).  The wheel's columns stay beside, an independent second opinion.

``pinned_over_tolerance``: the pinned build's trials fail on the values of a float output (not on shapes, NaN or a
crash): its error exceeds the task's tolerance (:mod:`kit.suite.tolerance` derives one).

A task native converts but whose verification fails is marked ``native_incorrect`` in the suite's manifest
with the mismatch (:func:`kit.suite.nativemarks.write_marks`); the scores then leave it out of fast_p
(:mod:`kit.score.metrics`).  A task native cannot convert is no mark: its jobs are ``no_native`` already.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import polars as pl

from kit.job.worker import setup_worker
from kit.results.outcomes import StageFailure, VerifyOutcome
from kit.results.records import ErrorKind
from kit.settings.config import EvalConfig
from kit.stages import verify as sverify
from kit.suite import audit as saudit
from kit.suite.nativemarks import write_marks
from kit.suite.tasks import Task, load_suite

#: columns of the pinned native check, after :data:`kit.suite.audit.COLUMNS`
PINNED_COLUMNS: dict[str, pl.DataType] = {
    "pinned_version": pl.Utf8,
    "pinned_convert_ok": pl.Boolean,
    "pinned_ok": pl.Boolean,
    "pinned_max_abs_err": pl.Float64,
    "pinned_max_rel_err": pl.Float64,
    "pinned_err_over_atol": pl.Float64,
    "pinned_error": pl.Utf8,
    "pinned_edges_failed": pl.Utf8,
    "native_incorrect": pl.Boolean,
    "pinned_over_tolerance": pl.Boolean,
    "tolerance_reason": pl.Utf8,
}

Progress = Callable[[str, int, int], None]


def _errors(outcome: VerifyOutcome | None) -> tuple[float | None, float | None]:
    """The worst absolute and relative error over ``outcome``'s trials (None, None without trials)."""
    if outcome is None:
        return None, None
    return outcome.max_abs_err, outcome.max_rel_err


def pinned_row(task: Task, worker, scratch: Path) -> dict:  # noqa: ANN001 - a kit.job.worker.Worker
    """The :data:`PINNED_COLUMNS` of one task on ``worker``'s native build (``scratch``: a fresh folder)."""
    row: dict = {k: None for k in PINNED_COLUMNS}
    row.update(pinned_version=worker.mnn_version, tolerance_reason=task.tolerance.reason, native_incorrect=False,
               pinned_over_tolerance=False)
    model = worker.native_models.model(task)
    row["pinned_convert_ok"] = model is not None
    if model is None:
        row["pinned_error"] = "convert: " + worker.native_models.error(task)[:300]
        return row
    outcome: VerifyOutcome | None = None
    try:
        outcome = sverify.verify(task, model, worker.native_side, worker.native.runner, scratch / "verify",
                                 worker.settings.verify)
        row["pinned_ok"] = True
    except StageFailure as f:
        outcome = f.partial if isinstance(f.partial, VerifyOutcome) else None
        row.update(pinned_ok=False, native_incorrect=True, pinned_error=f"{f.status.value}: {f.message[:300]}",
                   pinned_over_tolerance=f.kind == ErrorKind.VALUE  # values off, not shapes, NaN or a crash,
                   and any(o.dtype == "float32" for o in task.outputs))  # of an output a tolerance applies to
    abs_err, rel_err = _errors(outcome)
    row.update(pinned_max_abs_err=abs_err, pinned_max_rel_err=rel_err)
    if abs_err is not None and task.tolerance.atol > 0:
        row["pinned_err_over_atol"] = abs_err / task.tolerance.atol
    verdicts = worker.native_models.edge_verdicts(task, worker.native.runner, scratch / "edges")
    row["pinned_edges_failed"] = " ".join(sorted(n for n, ok in verdicts.items() if not ok))
    return row


def pinned_rows(cfg: EvalConfig, tasks: list[Task], progress: Progress | None = None) -> pl.DataFrame:
    """``task_id`` and :data:`PINNED_COLUMNS` for every task of ``tasks``, run on the pinned tree's native build
    of ``cfg`` (module docstring).  The verification trials are ``cfg.verify``'s.

    Raises:
        kit.mnn.source.SourceError, kit.mnn.native.NativeBuildError: the tree cannot be had or built.
    """
    worker = setup_worker(cfg)
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="mkb-pinned-", dir=worker.scratch) as tmp:
            for k, task in enumerate(tasks, 1):
                scratch = Path(tmp) / task.id
                scratch.mkdir()
                rows.append({"task_id": task.id, **pinned_row(task, worker, scratch)})
                if progress is not None:
                    progress(task.id, k, len(tasks))
    finally:
        worker.release()
    return pl.DataFrame(rows, schema={"task_id": pl.Utf8, **PINNED_COLUMNS}, orient="row")


def mark(tasks_dir: Path, pinned: pl.DataFrame, mnn_version: str) -> int:
    """Write the pinned verdicts into ``tasks_dir/manifest.json`` (:func:`kit.suite.nativemarks.write_marks`);
    returns the number of tasks marked ``native_incorrect``.  A folder without a manifest gets no marks (0)."""
    if not (Path(tasks_dir) / "manifest.json").is_file():
        return 0
    verdicts = {r["task_id"]: (r["pinned_error"] if r["native_incorrect"] else "", (r["pinned_edges_failed"] or "").split())
                for r in pinned.iter_rows(named=True) if r["pinned_convert_ok"]}
    return write_marks(tasks_dir, verdicts, mnn_version)


def audit_with_pinned(tasks_dir: Path, cfg: EvalConfig | None, ids: list[str] | None = None, *, wheel: bool = True,
                      torch_check: bool = True, progress: Progress | None = None) -> pl.DataFrame:
    """:func:`kit.suite.audit.audit` of ``tasks_dir`` (``wheel``: the PyPI wheel's check), joined with
    :func:`pinned_rows` when ``cfg`` is given (else the pinned columns are null); marks written by the caller
    (:func:`mark`).

    Raises:
        as :func:`kit.suite.audit.audit` and :func:`pinned_rows`.
    """
    df = saudit.audit(tasks_dir, ids=ids, native=wheel, torch_check=torch_check, progress=progress)
    if cfg is None:
        return df.with_columns(pl.lit(None, dtype=t).alias(c) for c, t in PINNED_COLUMNS.items())
    tasks = load_suite(Path(tasks_dir), ids=ids)
    return df.join(pinned_rows(cfg, tasks, progress), on="task_id", how="left")
