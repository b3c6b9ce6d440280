"""The one outline of a run, for every dispatch mode: ``mkb eval`` (:func:`evaluate`) and ``mkb check``
(:func:`check`).

    plan the jobs (candidates read and refused before any slow setup; the run directory's resume set)
    → write the records of samples naming unknown tasks
    → run the pending jobs on an executor (:class:`kit.run.serial_executor.SerialExecutor`, :class:`kit.dispatch.RayExecutor`),
      each record into the run's shards as it arrives, this session's provenance beside them
    → print CSR, FCR and fast_p per method → merge the shards → write the report.

Setup (pristine tree, native baseline, a workspace per worker) is done once and cached; jobs already
recorded in the run directory are skipped, so a killed run is resumed by running the same command again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from kit import candidates as kcand
from kit.baselines.notes import native_timing_note
from kit.job.pipeline import run_job
from kit.job.record import Job, job_from, rejected_record
from kit.job.worker import setup_worker
from kit.mnn.source import ensure_pristine
from kit.results.records import Record
from kit.results.shards import RecordSink, ShardWriter, read_records
from kit.run import provenance as prov
from kit.run.plan import Executed, RunStats, pending, plan_jobs
from kit.run.rundir import prepare as prepare_run_dir
from kit.run.rundir import release as release_run_dir
from kit.score.headline import headline
from kit.score.metrics import NativeRule
from kit.settings.config import ConfigError, EvalConfig
from kit.suite.listing import check_selected
from kit.suite.nativemarks import read_marks
from kit.suite.tasks import Task, find_task, load_suite

log = logging.getLogger("kit")


class Executor(Protocol):
    """What runs a run's pending jobs (a context manager: entered around :meth:`where` and :meth:`run`)."""

    def __enter__(self) -> Executor: ...

    def __exit__(self, *exc: object) -> None: ...

    def where(self) -> str:
        """The workers the jobs would run on, in words."""

    def run(self, jobs: Sequence[Job], sink: RecordSink, notes: prov.SessionLog, label: str = "eval") -> RunStats:
        """Run every job; give each record to ``sink`` as it comes; note the session in ``notes``."""


def executor_for(cfg: EvalConfig) -> Executor:
    """The executor ``dispatch.mode`` names: serial in this process, or Ray (embedded or a cluster)."""
    if cfg.dispatch.mode == "serial":
        from kit.run.serial_executor import SerialExecutor

        return SerialExecutor(cfg)
    from kit.dispatch import RayExecutor  # imports Ray (~1 s): only for a run that uses it

    return RayExecutor(cfg)


def evaluate(cfg: EvalConfig, executor: Executor | None = None) -> int:
    """``mkb eval``: evaluate every candidate of ``cfg`` (on ``executor``, default :func:`executor_for`);
    print CSR, FCR and fast_p per method; merge the shards and write the report.  Returns 0.

    Raises:
        kit.suite.tasks.TaskError: a selected task differs from the suite's manifest.json (before any setup).
        kit.settings.config.ConfigError: nothing to evaluate; the run directory holds another config's records, is in
            use by another evaluation, or holds a sample whose candidate files changed (before any setup).
        kit.candidates.CandidateSourceError: a source path is missing or malformed (before any setup).
        what the executor raises (a worker's setup error, :class:`kit.dispatch.DispatchError`).
    """
    tasks = load_suite(cfg.tasks.dir, cfg.tasks.split, cfg.tasks.ids or None)
    all_ids = {t.id for t in load_suite(cfg.tasks.dir, "all")}
    if not check_selected(cfg.tasks.dir, tasks):
        log.info("%s has no manifest.json: the task files are not checked against one", cfg.tasks.dir)
    if not cfg.candidates.sources and not cfg.candidates.native:
        raise ConfigError("candidates.sources is empty and candidates.native is false: nothing to evaluate")
    run_dir = prepare_run_dir(cfg)  # held until this evaluation ends
    try:
        # candidates are read (and a malformed source refused) before the slow setup of MNN; the run directory
        # is locked, so the resume set read here still holds when the jobs run
        plan = plan_jobs(cfg, tasks, all_ids, ensure_pristine(cfg.mnn).root if cfg.candidates.native else None)
        write_orphans(plan.orphans, run_dir, plan.done)
        execute(plan.jobs, plan.done, run_dir, executor or executor_for(cfg))
    finally:
        release_run_dir(run_dir)
    print_summary(read_records(run_dir), tasks, cfg)
    return 0


def execute(jobs: list[Job], done: set[str], run_dir: Path, executor: Executor, label: str = "eval") -> Executed:
    """Run the jobs of ``jobs`` not in ``done`` on ``executor``, their records into ``run_dir``'s shards and
    this session into its ``provenance.json`` (a session with nothing to run writes neither, and starts no
    worker).  Returns what it did (:class:`kit.run.plan.Executed`).

    Raises:
        what the executor raises.
    """
    todo = pending(jobs, done)
    unique = len({j.job_id for j in jobs})
    counts = Executed(jobs=unique, skipped=unique - len(todo))
    line = f"mkb {label}: {unique} jobs, {unique - len(todo)} already recorded in {run_dir}"
    if not todo:
        print(line)
        return counts
    run_dir.mkdir(parents=True, exist_ok=True)
    with executor:
        print(f"{line}; {len(todo)} to run on {executor.where()}")
        with RecordSink(run_dir) as sink:
            stats = executor.run(todo, sink, prov.SessionLog(run_dir), label)
    return replace(counts, ran=stats.ran, workers=stats.workers, work_s=stats.work_s)


def write_orphans(orphans: list[Record], run_dir: Path, done: set[str]) -> None:
    """Write the records of samples naming unknown task ids (those not recorded yet) to the driver's shard."""
    new = [r for r in orphans if r.job_id not in done]
    if new:
        with ShardWriter(run_dir, "driver") as w:
            for r in new:
                w.append(r)


def print_summary(frame: pl.DataFrame, tasks: list[Task], cfg: EvalConfig) -> None:
    """Print CSR, FCR and fast_p per method; then (``report.enabled``) merge the shards and write the report."""
    print(headline(frame, tasks, cfg.report.fast_p))
    if (note := native_timing_note(frame)) is not None:
        print(note)
    prov.note_selection(cfg.run.dir, cfg)  # the report's denominator includes this session's tasks
    if cfg.report.enabled and frame.height:
        from kit.report import build_report
        from kit.results.shards import merge

        merged = merge(cfg.run.dir)
        # the whole suite: the report takes the run's own task selection from provenance.json (every
        # session's, as `mkb report` does), not only this session's
        paths = build_report([cfg.run.dir], cfg.run.dir / "report", load_suite(cfg.tasks.dir, "all"),
                             native=NativeRule(read_marks(cfg.tasks.dir), cfg.report.score_native_incorrect))
        print(f"results: {merged}\nreport: {paths.html}")


def check(cfg: EvalConfig, task_id: str, files: list[Path] | None = None, response: Path | None = None) -> dict[str, Any]:
    """``mkb check``: evaluate one candidate for ``task_id`` and return the record as a JSON-able dict, with
    ``timing``: ``"timed"`` when the timing stage ran, else ``"not_timed"`` (``timing.enabled = false``, or the
    job ended before timing).

    Raises:
        kit.suite.tasks.TaskError: unknown task id.
        FileNotFoundError: a candidate file does not exist.
    """
    task = find_task(cfg.tasks.dir, task_id)
    if response is not None:
        text = response.read_bytes().decode("utf-8", "replace")
        cand = kcand.candidate_from_response("check", task, "0", text, cfg.candidates.max_file_bytes, str(response))
    else:
        assert files is not None
        raw = {}
        for p in files:
            if not p.is_file():
                raise FileNotFoundError(f"--files: {p} does not exist")
            raw[p.name] = p.read_bytes()
        cand = kcand.make_candidate("check", task, "0", raw, cfg.candidates.max_file_bytes, "cli")
    job = job_from(cand, task, cfg.digest(), cfg.target_info())
    if job.files is None:
        rec = rejected_record(job)
    else:
        worker = setup_worker(cfg)
        try:
            rec = run_job(job, worker)
        finally:
            worker.release()
    return verdict(rec)


def verdict(rec: Record) -> dict[str, Any]:
    """The verdict ``mkb check`` prints (and ``mkb serve`` returns) for ``rec``: the record as JSON types, its
    raw timing samples replaced by their counts (``native_samples``, ``candidate_samples``; the record in a run
    keeps them all)."""
    out = rec.model_dump(mode="json")
    # whether the speedup fields hold a measurement: a correct candidate of `timing.enabled = false` (`mkb check
    # --no-timing`) is `ok` but "not_timed", and never counts towards fast_p (docs/scoring.md)
    out["timing"] = "timed" if rec.timing_s is not None else "not_timed"
    # raw samples are long: the verdict keeps their count (the record in a run keeps them all)
    out["native_samples"] = len(out.pop("native_samples_ms"))
    out["candidate_samples"] = len(out.pop("candidate_samples_ms"))
    out.pop("native_samples_round")
    out.pop("candidate_samples_round")
    return out
