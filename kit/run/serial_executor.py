"""The serial executor (``dispatch.mode = "serial"``): one worker in this process, jobs one after the other.

The jobs of one task run one after the other (:class:`kit.run.queue.JobQueue` order, as a Ray worker takes
them), tasks in the order their first job comes; each record goes to the run's sink as it comes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from kit.host.progress import LiveStatus, StageTally, job_progress, log_record
from kit.job.pipeline import run_job
from kit.job.record import Job
from kit.job.worker import Worker, setup_worker
from kit.results.records import Record
from kit.results.shards import RecordSink
from kit.run.plan import RunStats, record_setup_failure
from kit.run.provenance import SessionLog, collect
from kit.run.queue import JobQueue
from kit.settings.config import EvalConfig


class SerialExecutor:
    """Runs jobs in one :class:`~kit.job.worker.Worker` of this process (``setup(cfg)``, default
    :func:`kit.job.worker.setup_worker`; its workspace is released at the end).  A context manager like
    :class:`kit.dispatch.RayExecutor` (nothing to connect)."""

    def __init__(self, cfg: EvalConfig, setup: Callable[[EvalConfig], Worker] = setup_worker,
                 job_fn: Callable[[Job, Worker], Record] = run_job) -> None:
        self.cfg = cfg
        self.setup = setup
        self.job_fn = job_fn

    def __enter__(self) -> SerialExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def where(self) -> str:
        return "1 worker in this process"

    def run(self, jobs: Sequence[Job], sink: RecordSink, notes: SessionLog, label: str = "eval") -> RunStats:
        """Set up the worker, then run ``jobs`` one by one in it (task-grouped order); each record goes to
        ``sink`` as it comes.  A setup that fails gives every job a ``harness_error`` record with its one-line
        cause (:func:`kit.run.plan.record_setup_failure`) before its exception is re-raised.

        Raises:
            what the setup raises (:class:`kit.mnn.source.SourceError`, :class:`kit.mnn.native.NativeBuildError`).
        """
        try:
            worker = self.setup(self.cfg)
        except Exception as exc:
            record_setup_failure(jobs, set(), exc, sink)
            raise
        try:
            notes.start(collect(self.cfg, worker))
            ready = time.monotonic()
            tally = StageTally(total=len(jobs))
            with job_progress() as progress:
                status = LiveStatus(tally, worker)  # shows the stage worker.stage names while a job runs
                bar = progress.add_task(label, total=len(jobs), status=status)
                for job in JobQueue(jobs):
                    status.label = f"{job.task.id}/{job.method}/{job.sample_id}"
                    rec = self.job_fn(job, worker)
                    sink.append(worker.name, rec)
                    tally.add(rec)
                    status.label = ""
                    progress.update(bar, advance=1)
                    log_record(rec)
            return RunStats(workers=1, ran=tally.done, work_s=time.monotonic() - ready)
        finally:
            worker.release()
