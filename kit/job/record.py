"""A job and its record: :class:`Job` (one candidate sample, or a rejected one, for one task) and the one place
a job's record is built (:func:`job_record`, from what the job gathered, :class:`kit.results.outcomes.Outcome`, and how it
failed); the other factories build the records of jobs that produced none themselves (rejected before any build,
unknown task ids, lost workers, a worker whose setup failed).

A job's ``job_id`` hashes task, method, sample, the candidate's sha256 and the config digest, so a resumed run
skips exactly the jobs it recorded.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kit import candidates as kcand
from kit.host.target import Target
from kit.results.outcomes import Outcome, StageFailure, Where
from kit.results.records import STAGE_FIELDS, ErrorKind, JobPhases, Record, Status
from kit.stages.screen import response_flags
from kit.suite.tasks import Task

if TYPE_CHECKING:
    from kit.job.artefacts import BuildHalf

log = logging.getLogger("kit")

#: longest ``error_message`` a record keeps (characters)
MAX_MESSAGE = 4000


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
    #: remarks of the candidate's parsing (ignored response blocks, hidden files): flagged in the record
    notes: tuple[str, ...] = ()
    #: what the job is built for and where it is timed (the record's ``target_arch``, ``build_mode``,
    #: ``timing_device``)
    target: Target = field(default_factory=Target)

    @property
    def job_id(self) -> str:
        return make_job_id(self.task.id, self.method, self.sample_id, self.candidate_sha256, self.config_digest)


def make_job_id(task_id: str, method: str, sample_id: str, candidate_sha256: str, config_digest: str) -> str:
    """sha256 over task id, method, sample id, candidate sha256 and config digest (hex, 24 chars)."""
    key = "\0".join([task_id, method, sample_id, candidate_sha256, config_digest])
    return hashlib.sha256(key.encode()).hexdigest()[:24]


def now_utc() -> str:
    """The current time as ISO-8601 UTC, to the second (``Record.started_at``)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def _identity(job: Job) -> dict[str, Any]:
    """The record fields that identify ``job`` (ids, hashes, task metadata)."""
    t = job.task
    return dict(job_id=job.job_id, method=job.method, task_id=t.id, sample_id=job.sample_id,
                candidate_sha256=job.candidate_sha256, config_digest=job.config_digest, category=t.category,
                op_type=t.op_type, mechanism=t.mechanism, split=t.split)


def _results(outcome: Outcome) -> dict[str, Any]:
    """The record fields of the stages that ran (:data:`kit.results.records.STAGE_FIELDS`)."""
    out: dict[str, Any] = {}
    for stage, fields in STAGE_FIELDS.items():
        part = getattr(outcome, stage)
        if part is not None:
            for name, attr in fields.items():
                value = getattr(part, attr)
                out[name] = list(value) if isinstance(value, tuple) else value
    t = outcome.timing
    if t is not None and t.no_native_reason is not None:
        out |= dict(error_kind=ErrorKind.NO_NATIVE,
                    error_message=f"native MNN cannot convert this task: {t.no_native_reason[:500]}")
    out["flags"] = list(outcome.flags) + list(out.get("flags", []))
    if outcome.phases:
        out["phases"] = JobPhases(**{f"{name}_s": round(s, 4) for name, s in outcome.phases.items()})
    return out


def job_record(job: Job, where: Where, outcome: Outcome, failure: StageFailure | None = None, *,
               wall_s: float | None = None, attempts: int = 1) -> Record:
    """The record of ``job``: its identity, ``where`` it ran, the results of the stages in ``outcome``, and
    ``failure``'s status, error kind, message (at most :data:`MAX_MESSAGE` characters) and signal (status
    ``ok`` without a failure).  ``wall_s``: seconds the job took (None: not measured)."""
    fields = _identity(job) | job.target.describe() | asdict(where) | _results(outcome)
    if failure is not None:
        fields |= dict(status=failure.status, error_kind=failure.kind, error_message=failure.message[:MAX_MESSAGE])
        if failure.signal is not None:
            fields["signal"] = failure.signal
    else:
        fields["status"] = Status.OK
    return Record(**fields, wall_s=wall_s, attempts=attempts)


def rejected_record(job: Job) -> Record:
    """The record of a rejected candidate (no workspace, no build)."""
    failure = StageFailure(Status.REJECTED_INPUT, job.reject_kind, job.reject_reason)
    return job_record(job, Where(started_at=now_utc()), Outcome(flags=response_flags(job.notes)), failure)


def lost_record(job: Job, attempts: int, status: Status, message: str, worker: str = "", started_at: str = "") -> Record:
    """The record of a job that produced none itself (``worker_lost`` or ``harness_error``)."""
    failure = StageFailure(status, ErrorKind.INTERNAL, message)
    return job_record(job, Where(worker=worker, started_at=started_at), Outcome(), failure, attempts=attempts)


def setup_cause(exc: BaseException) -> str:
    """The one line that says why a worker's setup failed: the error's own ``cause`` (a
    :class:`kit.mnn.native.NativeBuildError`'s: the build's first real error and what to do) or its message's
    first line (the type's name for an empty message)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, str) and cause.strip():
        return cause.strip()
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def setup_failed_record(job: Job, message: str, worker: str = "") -> Record:
    """The record of a job that never ran because the setup of the run's worker failed (``worker``: its name,
    when it had one): ``harness_error`` of error kind ``setup`` with ``message``, the one-line cause
    (:func:`setup_cause`).  The kit's fault, so the next run of the same command retries the job."""
    failure = StageFailure(Status.HARNESS_ERROR, ErrorKind.SETUP, message)
    return job_record(job, Where(worker=worker, started_at=now_utc()), Outcome(), failure)


def timing_lost_record(job: Job, built: BuildHalf, attempts: int, message: str, timing_worker: str) -> Record:
    """The record of a job that built and verified (``built``: what its build half measured) but whose
    timing worker, or the node holding its artefacts, died on every try: ``timing_failed`` with error
    kind ``worker_lost`` — it counts as compiled and correct (what was measured stands), never as fast."""
    failure = StageFailure(Status.TIMING_FAILED, ErrorKind.WORKER_LOST, message)
    return job_record(job, replace(built.where, timing_worker=timing_worker), built.outcome, failure,
                      wall_s=built.wall_s, attempts=attempts)


def orphan_record(rej: kcand.Rejection, digest: str) -> Record:
    """The record of a sample whose task id is not in the suite (no task, so no job to run)."""
    return Record(
        job_id=make_job_id(rej.task_id, rej.method, rej.sample_id, rej.sha256, digest),
        method=rej.method,
        task_id=rej.task_id,
        sample_id=rej.sample_id,
        candidate_sha256=rej.sha256,
        config_digest=digest,
        status=Status.REJECTED_INPUT,
        error_kind=rej.error_kind,
        error_message=rej.reason,
        started_at=now_utc(),
    )


def job_from(c: kcand.CandidateOrRejection, task: Task, digest: str, target: Target | None = None) -> Job:
    """The job of candidate (or rejection) ``c`` for ``task`` under config digest ``digest``, built for
    ``target`` (default: the x86_64 host)."""
    t = target or Target()
    if isinstance(c, kcand.Candidate):
        return Job(task, c.method, c.sample_id, c.sha256, digest, files=dict(c.files), notes=tuple(c.notes), target=t)
    return Job(task, c.method, c.sample_id, c.sha256, digest, reject_kind=c.error_kind, reject_reason=c.reason,
               notes=tuple(c.notes), target=t)
