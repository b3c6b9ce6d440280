"""The jobs of a run: :func:`plan_jobs` makes them from a configuration (one per candidate sample) and reads the
run directory's resume set; :func:`record_setup_failure` records the pending jobs of a worker whose setup failed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kit import candidates as kcand
from kit.job.record import Job, job_from, orphan_record, setup_cause, setup_failed_record
from kit.results.records import Record
from kit.results.shards import ShardWriter
from kit.run.rundir import recorded_jobs
from kit.suite.tasks import Task

if TYPE_CHECKING:
    from kit.results.shards import RecordSink
    from kit.settings.config import EvalConfig

log = logging.getLogger("kit")

def record_setup_failure(jobs: Sequence[Job], recorded: set[str], exc: BaseException, sink: RecordSink,
                         worker: str = "") -> int:
    """Give each job of ``jobs`` (a run's pending jobs) whose id is not in ``recorded`` (those this session
    recorded already) its :func:`setup_failed_record`, written to one ``setup`` shard of ``sink``'s run, each job
    id once;
    the executors call it when a worker's setup raised ``exc``, before re-raising it.  An error whose
    ``records_jobs`` is False (:class:`kit.mnn.source.SourceError`: ``mnn.source_dir`` or the tarball is not the
    pinned tree) is the user's input refused, like a bad config: no record.  Returns the records written.
    Raises what writing a shard raises."""
    if not getattr(exc, "records_jobs", True):  # a refused input (the configured tree): no job ran, none recorded
        return 0
    line = setup_cause(exc)
    todo = pending(list(jobs), recorded)
    if todo:  # one shard file for them all (a record per file would leave thousands of tiny files)
        with ShardWriter(sink.run_dir, "setup", flush_every=len(todo)) as shard:
            for job in todo:
                shard.append(setup_failed_record(job, line, worker))
    if todo:
        log.warning("the setup of %s failed; the %d job(s) of this run not recorded yet are recorded as "
                    "harness_error (rerun the same command to retry them): %s", worker or "the worker", len(todo), line)
    return len(todo)


def make_jobs(
    cfg: EvalConfig, tasks: list[Task], all_ids: set[str], mnn_root: Path | None
) -> tuple[list[Job], list[Record]]:
    """One job per candidate sample of every configured source (and the native method if enabled, its files
    read from the tree at ``mnn_root``), plus the finished records of samples naming unknown task ids.
    ``all_ids``: every task id of the suite (samples of known tasks outside ``tasks`` are skipped).

    Raises:
        kit.candidates.CandidateSourceError: a source path is missing or malformed.
    """
    by_id = {t.id: t for t in tasks}
    ignore = all_ids - set(by_id)
    digest = cfg.digest()
    jobs: list[Job] = []
    orphans: list[Record] = []
    for src in cfg.candidates.sources:
        for c in kcand.load_candidates(src, by_id, cfg.candidates.max_file_bytes, ignore_ids=ignore):
            task = by_id.get(c.task_id)
            if task is None:
                assert isinstance(c, kcand.Rejection)
                orphans.append(orphan_record(c, digest))
                continue
            jobs.append(job_from(c, task, digest, cfg.target_info()))
    if cfg.candidates.native and mnn_root is not None:
        for t in tasks:
            jobs.append(job_from(kcand.native_candidate(t, mnn_root), t, digest, cfg.target_info()))
    return jobs, orphans


@dataclass(frozen=True)
class Plan:
    """The jobs of a run, the records of samples naming unknown tasks, and the job ids already recorded in
    the run directory (the resume set)."""

    jobs: list[Job]
    orphans: list[Record]
    done: set[str]

    @property
    def pending(self) -> list[Job]:
        """The jobs not recorded yet, each job id once, in order."""
        return pending(self.jobs, self.done)


@dataclass(frozen=True)
class Executed:
    """What one session of a run did: ``jobs`` (distinct job ids planned), ``skipped`` (recorded before),
    ``ran`` (records produced now), ``workers`` the executor ran them on, and ``work_s``: seconds from the first
    worker ready to the last record (:class:`RunStats`; 0 when nothing ran)."""

    jobs: int
    skipped: int
    ran: int = 0
    workers: int = 0
    work_s: float = 0.0


@dataclass(frozen=True)
class RunStats:
    """What an executor did: ``workers`` it ran the jobs on, records it produced (``ran``), and ``work_s``:
    seconds from the first worker ready to the last record (the fixed start of workers excluded)."""

    workers: int
    ran: int
    work_s: float


def pending(jobs: list[Job], done: set[str]) -> list[Job]:
    """The jobs of ``jobs`` whose id is not in ``done``, each job id once, in order."""
    out: dict[str, Job] = {}
    for j in jobs:
        if j.job_id not in done:
            out.setdefault(j.job_id, j)
    return list(out.values())


def plan_jobs(cfg: EvalConfig, tasks: list[Task], all_ids: set[str], mnn_root: Path | None) -> Plan:
    """:func:`make_jobs` for ``cfg.run.dir``, and the job ids already recorded there (the resume set), after
    checking that no sample recorded there has changed its candidate files since
    (:func:`kit.run.rundir.recorded_jobs`: one read of the records for both).

    Raises:
        kit.settings.config.ConfigError: a recorded sample changed.
        kit.candidates.CandidateSourceError: as :func:`make_jobs`.
    """
    jobs, orphans = make_jobs(cfg, tasks, all_ids, mnn_root)
    done = recorded_jobs(cfg.run.dir, [(j.method, j.task.id, j.sample_id, j.job_id) for j in jobs]
                         + [(r.method, r.task_id, r.sample_id, r.job_id) for r in orphans])
    return Plan(jobs, orphans, done)
