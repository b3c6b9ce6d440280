"""``run_job(job, worker) -> Record``: the stages in order, and the one place exceptions become statuses.

register → build → convert + verify → time, in a workspace the worker owns.  Whatever happens, the
workspace is restored and exactly one :class:`~kit.records.Record` comes back.
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
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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
    _native_models: dict[str, Path | None] = field(default_factory=dict)
    _native_errors: dict[str, str] = field(default_factory=dict)

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
    started = datetime.now(UTC).isoformat(timespec="seconds")
    t0 = time.monotonic()
    fields: dict[str, Any] = _base_fields(job, worker) | {"started_at": started}
    scratch = Path(tempfile.mkdtemp(prefix=f"mkb-{job.job_id[:8]}-"))
    partial: dict[str, Any] = {}  # stage results so far: kept whatever happens later
    try:
        fields |= _stages(job, worker, scratch, partial)
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


def _stages(job: Job, worker: Worker, scratch: Path, out: dict[str, Any]) -> dict[str, Any]:
    cfg, ws, task = worker.cfg, worker.workspace, job.task
    if job.files is None:
        raise StageFailure(Status.REJECTED_INPUT, job.reject_kind, job.reject_reason)
    ws.check_and_repair()
    swap = register.Swap()
    try:
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
        # 3. time against native
        if not cfg.timing.enabled:
            return out
        with _held(worker.gate, exclusive=False):
            native_model = worker.native_model(task)
        native = (native_model, worker.native_side) if native_model is not None else None
        try:
            with _held(worker.gate, exclusive=True):
                tr = stiming.time_candidate(cfg, task, worker.native.runner, (model, side), native, scratch / "timing")
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
                "error_message": f"native MNN cannot convert this task: {worker._native_errors.get(task.id, '')[:500]}",
            }
        return out
    finally:
        register.restore(ws, swap)


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
