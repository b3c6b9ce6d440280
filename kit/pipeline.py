"""``run_job(job, worker) -> Record``: the stages in order, and the one place exceptions become statuses.

register → build → convert + verify → time, in a workspace the worker owns.  Whatever happens, the
workspace is restored and exactly one :class:`~kit.records.Record` comes back.

When timing runs on other nodes than builds (``dispatch.build_resource``), a job is split in two halves:
:func:`build_job` on the build node (register → build → convert + verify, then the artefacts packed into a
:class:`~kit.artefacts.Built`) and :func:`time_job` on a timing node (a :class:`Timer`).  Both halves go
through the same exception→status mapping (:func:`_guarded`).
"""

from __future__ import annotations

import contextlib
import hashlib
import platform
import shutil
import socket
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kit import artefacts
from kit.artefacts import Built
from kit.config import EvalConfig
from kit.gate import NodeGate
from kit.images import is_emulated
from kit.mnn import build as mbuild
from kit.mnn import register
from kit.mnn.native import Native, workspace_lib_dir
from kit.mnn.workspace import Workspace
from kit.records import ErrorKind, Record, Status
from kit.stages import StageFailure
from kit.stages import timing as stiming
from kit.stages import verify as sverify
from kit.tasks import Task, sha256_file


@dataclass(frozen=True)
class Job:
    """One candidate (or a rejected one) for one task.

    ``files`` is None for a rejected candidate; then ``reject_kind``/``reject_reason`` say why.
    """

    task: Task
    method: str
    sample_id: str
    candidate_sha256: str
    config_digest: str
    files: dict[str, str] | None = None
    reject_kind: ErrorKind = ErrorKind.NONE
    reject_reason: str = ""

    @property
    def job_id(self) -> str:
        return make_job_id(self.task.id, self.method, self.sample_id, self.candidate_sha256, self.config_digest)


def make_job_id(task_id: str, method: str, sample_id: str, candidate_sha256: str, config_digest: str) -> str:
    """sha256 over task id, method, sample id, candidate sha256 and config digest (hex, 24 chars)."""
    key = "\0".join([task_id, method, sample_id, candidate_sha256, config_digest])
    return hashlib.sha256(key.encode()).hexdigest()[:24]


@dataclass
class Worker:
    """What a worker owns for its life: its workspace, the native baseline, a scratch area."""

    cfg: EvalConfig
    workspace: Workspace
    native: Native
    name: str = "w0"
    mnn_version: str = ""
    #: node-local lock: builds/verification shared, timing exclusive (None: no exclusivity)
    gate: NodeGate | None = None
    #: the stage the current job is in ("build", "verify", "time"; "" between jobs), for progress displays
    stage: str = ""
    _native_models: dict[str, Path | None] = field(default_factory=dict)
    _native_errors: dict[str, str] = field(default_factory=dict)

    @property
    def native_key(self) -> str:
        return self.native.key

    @property
    def native_side(self) -> sverify.Side:
        return sverify.Side(self.native.converter, self.native.lib_dir)

    def native_model(self, task: Task) -> Path | None:
        """The task converted by the native converter (cached on disk), or None if native cannot convert."""
        if task.id in self._native_models:
            return self._native_models[task.id]
        # keyed by the ONNX file's content: two suites may share a task id with different models
        stem = f"{task.id}-{sha256_file(task.onnx_path)[:16]}"
        out = self.native.models / f"{stem}.mnn"
        failed = self.native.models / f"{stem}.failed"
        model: Path | None = None
        if out.is_file():
            model = out
        elif failed.is_file():
            self._native_errors[task.id] = failed.read_text()
        else:
            tmp = self.native.models / f"{stem}.{self.name}.tmp.mnn"
            try:
                sverify.convert(self.cfg, task, self.native_side, tmp)
                tmp.replace(out)
                model = out
            except StageFailure as exc:
                failed.write_text(exc.message)
                self._native_errors[task.id] = exc.message
                tmp.unlink(missing_ok=True)
        self._native_models[task.id] = model
        return model


@dataclass
class Timer:
    """What a timing worker owns (``dispatch.build_resource``): the native baseline shipped from a build
    worker (``native_dir/lib``, ``native_dir/bin/mkb_runner``) and its node's gate."""

    cfg: EvalConfig
    native_dir: Path
    native_key: str
    name: str = "t0"
    gate: NodeGate | None = None
    stage: str = ""

    @property
    def runner(self) -> Path:
        return self.native_dir / "bin" / "mkb_runner"

    @property
    def lib_dir(self) -> Path:
        return self.native_dir / "lib"


def job_fields(job: Job) -> dict[str, Any]:
    """The record fields that identify ``job`` (ids, hashes, task metadata)."""
    t = job.task
    return dict(
        job_id=job.job_id,
        method=job.method,
        task_id=t.id,
        sample_id=job.sample_id,
        candidate_sha256=job.candidate_sha256,
        config_digest=job.config_digest,
        category=t.category,
        op_type=t.op_type,
        mechanism=t.mechanism,
        split=t.split,
    )


def _base_fields(job: Job, worker: Worker) -> dict[str, Any]:
    return job_fields(job) | dict(
        arch=platform.machine(),
        host=socket.gethostname(),
        worker=worker.name,
        mnn_version=worker.mnn_version or worker.cfg.mnn.version,
    )


def rejected_record(job: Job) -> Record:
    """The record of a rejected candidate (no workspace, no build)."""
    return Record(
        **job_fields(job),
        status=Status.REJECTED_INPUT,
        error_kind=job.reject_kind,
        error_message=job.reject_reason,
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def run_job(job: Job, worker: Worker) -> Record:
    """Evaluate one job in ``worker``'s workspace and return its record (never raises for a candidate's
    failure; a fault of the kit itself becomes a ``harness_error`` record with the traceback)."""
    rec = _guarded(job, _base_fields(job, worker), lambda scratch, out: _stages(job, worker, scratch, out))
    assert isinstance(rec, Record)
    return rec


def build_job(job: Job, worker: Worker) -> Record | Built:
    """The build node's half of a job whose timing runs on another node (``dispatch.build_resource``):
    register, build, convert and verify here (this node runs the build's architecture), then pack what
    timing needs (:class:`~kit.artefacts.Built`).  Returns the final :class:`Record` instead when the job
    ends here (a failure, or ``timing.enabled = false``).  Never raises for a candidate's failure."""
    return _guarded(job, _base_fields(job, worker), lambda scratch, out: _build_for_shipping(job, worker, scratch, out))


def time_job(job: Job, built: Built, timer: Timer) -> Record:
    """The timing node's half: unpack ``built`` into a scratch directory, time it against the shipped
    native baseline, and return the job's record (``worker`` = the build worker, ``timing_worker`` = this
    one; ``wall_s`` = both halves).  A bundle of another architecture or native build is a
    ``harness_error`` (a cluster fault, not the candidate's)."""
    fields = job_fields(job) | built.fields | {"timing_worker": timer.name, "timing_host": socket.gethostname()}
    build_wall_s = float(built.fields.get("wall_s") or 0.0)
    rec = _guarded(job, fields, lambda scratch, out: _time_shipped(job, built, timer, scratch, out))
    assert isinstance(rec, Record)
    return rec.model_copy(update={"wall_s": (rec.wall_s or 0.0) + build_wall_s})


Body = Callable[[Path, dict[str, Any]], "dict[str, Any] | Built"]


def _guarded(job: Job, base: dict[str, Any], body: Body) -> Record | Built:
    """Run ``body(scratch, partial)`` and turn its outcome into a record: the one place where exceptions
    become statuses.  ``partial`` collects stage results as they come, so a later failure keeps them."""
    started = base.get("started_at") or datetime.now(UTC).isoformat(timespec="seconds")
    t0 = time.monotonic()
    fields: dict[str, Any] = base | {"started_at": started}
    scratch = Path(tempfile.mkdtemp(prefix=f"mkb-{job.job_id[:8]}-"))
    partial: dict[str, Any] = {}  # stage results so far: kept whatever happens later
    try:
        result = body(scratch, partial)
        if isinstance(result, Built):
            return replace(result, fields=fields | result.fields | {"wall_s": time.monotonic() - t0})
        fields |= result
        fields["status"] = Status.OK
    except StageFailure as f:
        fields |= partial | f.fields
        fields |= {"status": f.status, "error_kind": f.kind, "error_message": f.message[:4000]}
    except Exception as exc:  # noqa: BLE001 - the one place that turns exceptions into statuses
        fields |= partial
        fields |= {
            "status": Status.HARNESS_ERROR,
            "error_kind": ErrorKind.INTERNAL,
            "error_message": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-3000:]}",
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    fields["wall_s"] = time.monotonic() - t0
    return Record(**fields)


def _relevant(diags: list, swap: register.Swap, ok: bool) -> list:
    """Diagnostics worth showing: every error (a removed symbol fails in another file), but warnings and
    notes only from the candidate's own files."""
    mine = set(swap.replaced) | set(swap.added)
    keep = [d for d in diags if d.file in mine or (not ok and d.severity in ("error", "fatal error", "linker"))]
    return keep[:50]


def _build_verify(job: Job, worker: Worker, scratch: Path, out: dict[str, Any]) -> tuple[Path, sverify.Side]:
    """Register, build, convert and verify; returns the candidate's model and side (its libraries stay in
    the workspace's build directory until the next build).  The workspace's sources are restored."""
    cfg, ws, task = worker.cfg, worker.workspace, job.task
    if job.files is None:
        raise StageFailure(Status.REJECTED_INPUT, job.reject_kind, job.reject_reason)
    swap = register.Swap()
    try:
        worker.stage = "build"  # checking the workspace and registering the files are part of the build
        ws.check_and_repair()
        swap = register.apply(ws, task, job.files)
        # 1. build
        with _held(worker.gate, exclusive=False):
            b = mbuild.build(ws, cfg)
        out |= {
            "build_s": b.wall_s + b.configure_s,
            "diagnostics": _relevant(b.diagnostics, swap, b.ok and not b.timed_out),
            "build_log_tail": b.log_tail[-4000:],
        }
        if b.timed_out:
            raise StageFailure(Status.COMPILE_TIMEOUT, ErrorKind.TIMEOUT, f"build exceeded {cfg.build.timeout_s} s", **out)
        if not b.ok:
            errors = [d for d in b.diagnostics if d.severity in ("error", "fatal error", "linker")]
            kind = ErrorKind.LINKER if errors and all(d.severity == "linker" for d in errors) else ErrorKind.COMPILER
            first = errors[0] if errors else None
            msg = f"{first.file}:{first.line}: {first.message}" if first else "build failed (see build_log_tail)"
            raise StageFailure(Status.COMPILE_ERROR, kind, msg, **out)
        out["build_log_tail"] = ""
        # 2. convert + verify with the candidate's converter and libraries
        worker.stage = "verify"
        side = sverify.Side(ws.build / "MNNConvert", workspace_lib_dir(ws))
        try:
            with _held(worker.gate, exclusive=False):
                model = sverify.convert(cfg, task, side, scratch / "candidate.mnn")
                trials = sverify.verify(cfg, task, model, side, worker.native.runner, scratch / "verify")
        except StageFailure as f:
            f.fields = out | f.fields
            _summarize_trials(f.fields)
            raise
        out["trials"] = trials
        _summarize_trials(out)
        return model, side
    finally:
        worker.stage = ""
        register.restore(ws, swap)


def _native_for(worker: Worker, task: Task) -> Path | None:
    with _held(worker.gate, exclusive=False):
        return worker.native_model(task)


def _stages(job: Job, worker: Worker, scratch: Path, out: dict[str, Any]) -> dict[str, Any]:
    """All stages on this node."""
    cfg, task = worker.cfg, job.task
    model, side = _build_verify(job, worker, scratch, out)
    if not cfg.timing.enabled:
        return out
    worker.stage = "time"
    try:
        native_model = _native_for(worker, task)
        native = (native_model, worker.native_side) if native_model is not None else None
        return _time(cfg, task, worker.native.runner, (model, side), native,
                     worker._native_errors.get(task.id, ""), worker.gate, scratch / "timing", out)
    finally:
        worker.stage = ""


def _build_for_shipping(job: Job, worker: Worker, scratch: Path, out: dict[str, Any]) -> dict[str, Any] | Built:
    model, side = _build_verify(job, worker, scratch, out)
    if not worker.cfg.timing.enabled:
        return out
    native_model = _native_for(worker, job.task)
    return Built(
        fields=dict(out),
        libs=artefacts.pack(artefacts.runtime_libs(worker.native.runner, side.lib_dir)),
        model=model.read_bytes(),
        native_model=native_model.read_bytes() if native_model is not None else None,
        native_key=worker.native_key,
        built_by=worker.name,
        native_error=worker._native_errors.get(job.task.id, ""),
    )


def _time_shipped(job: Job, built: Built, timer: Timer, scratch: Path, out: dict[str, Any]) -> dict[str, Any]:
    if built.native_key != timer.native_key:
        raise artefacts.ArtefactError(
            f"{built.built_by} built against native {built.native_key}, timing worker {timer.name} has {timer.native_key}"
        )
    built.libs.check_runs_here(f"the candidate libraries from {built.built_by}")
    lib_dir = built.libs.write(scratch / "ship") / "lib"
    model = scratch / "candidate.mnn"
    model.write_bytes(built.model)
    native = None
    if built.native_model is not None:
        (scratch / "native.mnn").write_bytes(built.native_model)
        native = (scratch / "native.mnn", sverify.Side(None, timer.lib_dir))
    timer.stage = "time"
    try:
        return _time(timer.cfg, job.task, timer.runner, (model, sverify.Side(None, lib_dir)), native,
                     built.native_error, timer.gate, scratch / "timing", out)
    finally:
        timer.stage = ""


def _time(
    cfg: EvalConfig,
    task: Task,
    runner: Path,
    candidate: tuple[Path, sverify.Side],
    native: tuple[Path, sverify.Side] | None,
    native_error: str,
    gate: NodeGate | None,
    scratch: Path,
    out: dict[str, Any],
) -> dict[str, Any]:
    """Stage 3: time ``candidate`` against ``native``: the runners start up under the node's gate held shared,
    their runs hold it exclusively."""
    try:
        tr = stiming.time_candidate(
            cfg, task, runner, candidate, native, scratch, hold=lambda: _held(gate, exclusive=True),
            prepare=lambda: _held(gate, exclusive=False),
        )
    except StageFailure as f:
        f.fields = out | f.fields
        raise
    out |= {
        "candidate_ms": tr.candidate_ms,
        "native_ms": tr.native_ms,
        "speedup": tr.speedup,
        "speedup_ci_low": tr.speedup_ci_low,
        "speedup_ci_high": tr.speedup_ci_high,
        "candidate_samples_ms": tr.candidate_samples_ms,
        "native_samples_ms": tr.native_samples_ms,
        "timing_threads": cfg.timing.threads,
        "timing_precision": cfg.timing.precision,
        "timing_basis": tr.basis,
        # under qemu the numbers are not the target CPU's: recorded, never scored as a speedup
        "timing_emulated": is_emulated(),
    }
    if native is None:
        out |= {
            "error_kind": ErrorKind.NO_NATIVE,
            "error_message": f"native MNN cannot convert this task: {native_error[:500]}",
        }
    return out


def _held(gate: NodeGate | None, exclusive: bool):
    if gate is None:
        return contextlib.nullcontext()
    return gate.exclusive() if exclusive else gate.shared()


def _summarize_trials(fields: dict[str, Any]) -> None:
    trials = fields.get("trials") or []
    abs_errs = [t.max_abs_err for t in trials if t.max_abs_err is not None]
    rel_errs = [t.max_rel_err for t in trials if t.max_rel_err is not None]
    if abs_errs:
        fields["max_abs_err"] = max(abs_errs)
    if rel_errs:
        fields["max_rel_err"] = max(rel_errs)
