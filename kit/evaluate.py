"""The three evaluation commands on one host: ``evaluate`` (mkb eval), ``check`` (mkb check) and
``calibrate`` (mkb calibrate).

Setup (pristine tree, native baseline, a workspace per worker) is done once and cached; jobs already
recorded in the run directory are skipped, so a killed run is resumed by running the same command again.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kit import candidates as kcand
from kit import proc
from kit import provenance as prov
from kit.artefacts import Bundle
from kit.config import EvalConfig
from kit.gate import NodeGate
from kit.jobqueue import JobQueue
from kit.mnn import build as mbuild
from kit.mnn.native import ensure_native, install_shipped
from kit.mnn.source import Pristine, ensure_pristine
from kit.mnn.workspace import open_workspace
from kit.pipeline import Job, Timer, Worker, make_job_id, rejected_record, run_job
from kit.progress import LiveStatus, StageTally, job_progress
from kit.records import Record, Status
from kit.rundir import prepare as prepare_run_dir
from kit.rundir import recorded_jobs
from kit.rundir import release as release_run_dir
from kit.tasks import Task, load_suite

log = logging.getLogger("kit")


def workspace_base(cfg: EvalConfig, pristine: Pristine) -> Path:
    return cfg.mnn.cache_dir / "workspaces" / f"{cfg.mnn.engine}-{pristine.digest[:16]}"


def setup_worker(cfg: EvalConfig, index: int | None = None, name: str | None = None) -> Worker:
    """Pristine tree, a locked workspace and the native baseline (built on first use, then cached).

    Raises:
        kit.mnn.source.SourceError, kit.mnn.native.NativeBuildError: the tree cannot be had or built.
    """
    import fcntl

    pristine = ensure_pristine(cfg)
    ws = open_workspace(workspace_base(cfg, pristine), pristine, index)
    # ours now: kill what a dead previous owner of this workspace left running (e.g. its compilers)
    killed = proc.track_children(ws.root / "procs")
    if killed:
        log.warning("workspace %s: killed %d process group(s) left by a dead worker", ws.root, len(killed))
    gate = NodeGate(cfg.mnn.cache_dir / "node.lock")
    lock_path = cfg.mnn.cache_dir / "native.lock"
    # the native lock first: never wait for another lock while holding the gate (see kit.gate)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with gate.shared():
            native = ensure_native(cfg, pristine, ws)
            mbuild.configure(ws, cfg)
    return Worker(cfg, ws, native, name=name or ws.root.name, mnn_version=cfg.mnn.version, gate=gate)


def setup_timer(cfg: EvalConfig, index: int, name: str, native_key: str, native: Bundle) -> Timer:
    """A timing worker (``dispatch.build_resource`` set): install the native baseline shipped from a build
    worker on this node and take the node's gate.

    Raises:
        kit.artefacts.ArtefactError: the shipped baseline is for another architecture than this node's.
    """
    # no child tracking here: a timer's children (the runner) are direct children and die with it
    # (PR_SET_PDEATHSIG), and a timer owns no directory another run's timer could not be using too
    shipped = install_shipped(cfg, native_key, native)
    return Timer(cfg, shipped, native_key, name=name, gate=NodeGate(cfg.mnn.cache_dir / "node.lock"))


def job_from(c: kcand.CandidateOrRejection, task: Task, digest: str) -> Job:
    if isinstance(c, kcand.Candidate):
        return Job(task, c.method, c.sample_id, c.sha256, digest, files=dict(c.files))
    return Job(task, c.method, c.sample_id, c.sha256, digest, reject_kind=c.error_kind, reject_reason=c.reason)


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
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def make_jobs(
    cfg: EvalConfig, tasks: list[Task], all_ids: set[str], mnn_root: Path | None
) -> tuple[list[Job], list[Record]]:
    """One job per candidate sample of every configured source (and the native method if enabled), plus
    the finished records of samples naming unknown task ids.

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
            jobs.append(job_from(c, task, digest))
    if cfg.candidates.native and mnn_root is not None:
        for t in tasks:
            jobs.append(job_from(kcand.native_candidate(t, mnn_root), t, digest))
    return jobs, orphans


def plan_jobs(
    cfg: EvalConfig, tasks: list[Task], all_ids: set[str], mnn_root: Path | None
) -> tuple[list[Job], list[Record], set[str]]:
    """:func:`make_jobs` for ``cfg.run.dir``, and the job ids already recorded there (the resume set), after
    checking that no sample recorded there has changed its candidate files since
    (:func:`kit.rundir.recorded_jobs`: one read of the records for both).

    Raises:
        kit.config.ConfigError: a recorded sample changed.
        kit.candidates.CandidateSourceError: as :func:`make_jobs`.
    """
    jobs, orphans = make_jobs(cfg, tasks, all_ids, mnn_root)
    done = recorded_jobs(cfg.run.dir, [(j.method, j.task.id, j.sample_id, j.job_id) for j in jobs]
                         + [(r.method, r.task_id, r.sample_id, r.job_id) for r in orphans])
    return jobs, orphans, done


def write_orphans(orphans: list[Record], run_dir: Path, done: set[str]) -> None:
    from kit.shards import ShardWriter

    new = [r for r in orphans if r.job_id not in done]
    if new:
        with ShardWriter(run_dir, "driver") as w:
            for r in new:
                w.append(r)


def run_jobs(jobs: list[Job], worker: Worker, run_dir: Path, label: str = "eval") -> list[Record]:
    """Run ``jobs`` one by one in ``worker``, appending each record to the worker's shard as it comes.  The
    jobs of one task run one after the other (:class:`kit.jobqueue.JobQueue` order, as a Ray worker takes
    them), tasks in the order their first job comes."""

    from kit.shards import ShardWriter

    records: list[Record] = []
    tally = StageTally(total=len(jobs))
    with (
        ShardWriter(run_dir, worker.name) as writer,
        job_progress() as progress,
    ):
        status = LiveStatus(tally, worker)  # shows the stage worker.stage names while run_job runs
        bar = progress.add_task(label, total=len(jobs), status=status)
        for job in JobQueue(jobs):
            status.label = f"{job.task.id}/{job.method}/{job.sample_id}"
            rec = run_job(job, worker)
            writer.append(rec)
            records.append(rec)
            tally.add(rec)
            status.label = ""
            progress.update(bar, advance=1)
            if not progress.disable:
                continue
            log.info("%s %s/%s/%s: %s %s", label, job.task.id, job.method, job.sample_id, rec.status.value, rec.error_message[:120])
    return records


def evaluate(cfg: EvalConfig) -> int:
    """``mkb eval``: evaluate every candidate of ``cfg``; print CSR, FCR and fast_p per method. Returns 0.

    Raises what :func:`kit.rundir.prepare` raises (another config's records, the run directory in use by
    another evaluation), before any setup."""
    tasks = load_suite(cfg.tasks.dir, cfg.tasks.split, cfg.tasks.ids or None)
    all_ids = {t.id for t in load_suite(cfg.tasks.dir, "all")}
    if not cfg.candidates.sources and not cfg.candidates.native:
        from kit.config import ConfigError

        raise ConfigError("candidates.sources is empty and candidates.native is false: nothing to evaluate")
    run_dir = prepare_run_dir(cfg)  # held until this evaluation ends
    try:
        if cfg.dispatch.mode != "serial":
            from kit.dispatch import evaluate_distributed

            return evaluate_distributed(cfg, tasks, all_ids)
        return _evaluate_serial(cfg, tasks, all_ids, run_dir)
    finally:
        release_run_dir(run_dir)


def _evaluate_serial(cfg: EvalConfig, tasks: list[Task], all_ids: set[str], run_dir: Path) -> int:
    from kit.shards import read_records

    # candidates are read (and a malformed source refused) before the slow setup of MNN; the run directory
    # is locked (kit.rundir.prepare), so the resume set read here still holds after the setup
    jobs, orphans, done = plan_jobs(cfg, tasks, all_ids, ensure_pristine(cfg).root if cfg.candidates.native else None)
    worker = setup_worker(cfg)
    try:
        write_orphans(orphans, run_dir, done)
        pending = [j for j in jobs if j.job_id not in done]
        print(f"mkb eval: {len(jobs)} jobs over {len(tasks)} tasks, {len(jobs) - len(pending)} already recorded in {run_dir}")
        if pending:  # a session that runs nothing leaves no trace in the provenance
            prov.save(run_dir, prov.load(run_dir), prov.collect(cfg, worker))
        run_jobs(pending, worker, run_dir)
    finally:
        worker.workspace.release()
    frame = read_records(run_dir)
    print_summary(frame, tasks, cfg)
    return 0


def print_summary(frame, tasks: list[Task], cfg: EvalConfig) -> None:
    """Print CSR, FCR and fast_p per method; then (``report.enabled``) merge the shards and write the report."""
    from kit import metrics

    print(metrics.headline(frame, tasks, cfg.report.fast_p))
    prov.note_selection(cfg.run.dir, cfg)  # the report's denominator includes this session's tasks
    if cfg.report.enabled and frame.height:
        from kit.report import build_report
        from kit.shards import merge

        merged = merge(cfg.run.dir)
        # the whole suite: the report takes the run's own task selection from provenance.json (every
        # session's, as `mkb report` does), not only this session's
        paths = build_report([cfg.run.dir], cfg.run.dir / "report", load_suite(cfg.tasks.dir, "all"))
        print(f"results: {merged}\nreport: {paths.html}")


def check(cfg: EvalConfig, task_id: str, files: list[Path] | None = None, response: Path | None = None) -> dict[str, Any]:
    """``mkb check``: evaluate one candidate for ``task_id`` and return the record as a JSON-able dict.

    Raises:
        kit.tasks.TaskError: unknown task id.
        FileNotFoundError: a candidate file does not exist.
    """
    from kit.tasks import TaskError

    tasks = {t.id: t for t in load_suite(cfg.tasks.dir, "all")}
    if task_id not in tasks:
        raise TaskError(f"--task: unknown task id {task_id!r} in {cfg.tasks.dir}")
    task = tasks[task_id]
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
    job = job_from(cand, task, cfg.digest())
    if job.files is None:
        rec = rejected_record(job)
    else:
        worker = setup_worker(cfg)
        try:
            rec = run_job(job, worker)
        finally:
            worker.workspace.release()
    out = rec.model_dump(mode="json")
    # raw samples are long: the verdict keeps their count (the record in a run keeps them all)
    out["native_samples"] = len(out.pop("native_samples_ms"))
    out["candidate_samples"] = len(out.pop("candidate_samples_ms"))
    return out


def calibrate(cfg: EvalConfig) -> int:
    """``mkb calibrate``: the native method on every task of the split; writes ``calibration.json`` in the
    run directory (per task: native passes?, A/A speedup and its CI) and prints the noise floor."""
    import numpy as np

    tasks = load_suite(cfg.tasks.dir, cfg.tasks.split, cfg.tasks.ids or None)
    run_dir = cfg.run.dir / "calibration"
    run_dir.mkdir(parents=True, exist_ok=True)
    worker = setup_worker(cfg)
    try:
        jobs = [job_from(kcand.native_candidate(t, worker.workspace.pristine.root), t, cfg.digest()) for t in tasks]
        from kit.shards import done_job_ids, read_records

        done = done_job_ids(run_dir)
        run_jobs([j for j in jobs if j.job_id not in done], worker, run_dir, label="calibrate")
    finally:
        worker.workspace.release()
    frame = read_records(run_dir)
    rows = []
    for r in frame.iter_rows(named=True):
        rows.append(
            {
                "task_id": r["task_id"],
                "native_passes": r["status"] in (Status.OK.value, Status.TIMING_FAILED.value),
                "status": r["status"],
                "error_kind": r["error_kind"],
                "speedup": r["speedup"],
                "speedup_ci_low": r["speedup_ci_low"],
                "speedup_ci_high": r["speedup_ci_high"],
                "native_ms": r["native_ms"],
            }
        )
    speeds = np.array([r["speedup"] for r in rows if r["speedup"] is not None], dtype=float)
    summary = {
        "tasks": len(rows),
        "native_passes": sum(r["native_passes"] for r in rows),
        "aa_speedup_median": float(np.median(speeds)) if speeds.size else None,
        "aa_speedup_p05": float(np.percentile(speeds, 5)) if speeds.size else None,
        "aa_speedup_p95": float(np.percentile(speeds, 95)) if speeds.size else None,
    }
    (cfg.run.dir / "calibration.json").write_text(json.dumps({"summary": summary, "tasks": rows}, indent=1))
    print(json.dumps(summary, indent=1))
    failing = [r["task_id"] for r in rows if not r["native_passes"]]
    if failing:
        print(f"native {cfg.mnn.version} fails {len(failing)} task(s): {', '.join(failing)}")
    return 0
