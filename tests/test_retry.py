"""A harness error is the kit's fault: ``mkb eval`` run again retries exactly those jobs, the retry is the record
that scoring, the printed summary and the report read, and until then a task left with only harness errors
counts as missing and is listed as such.

The jobs are the fixture engine's sample candidates planned by :func:`kit.run.plan.plan_jobs`; their verdicts come
from :class:`VerdictExecutor`, an executor of the :class:`kit.outline.evaluate.Executor` kind whose worker gives each
job the verdict its sample name says (as ``tests/test_resume.py``'s job function does), its records built by
:func:`kit.job.record.job_record` and written through the run's real record sink.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import polars as pl
from conftest_fixture import fixture_config_text

from kit.cli import main
from kit.job.record import Job, job_record, now_utc
from kit.outline.evaluate import evaluate
from kit.results.outcomes import Outcome, StageFailure, TimingOutcome, Where
from kit.results.records import ErrorKind, Status
from kit.results.shards import RecordSink, read_records, scan
from kit.run import provenance, rundir
from kit.run.plan import RunStats, plan_jobs
from kit.score import metrics
from kit.settings.config import EvalConfig, load_config
from kit.suite.tasks import load_suite

VERDICTS = {"compile_error": Status.COMPILE_ERROR, "wrong_result": Status.VERIFY_MISMATCH,
            "crash": Status.RUNTIME_CRASH}


class VerdictExecutor:
    """Gives every job the verdict of its sample name (``correct``: ok at 1.25x), except the job keys
    ``(task, sample)`` of ``harness``, which get ``harness_error``, and of ``lost``, which get ``worker_lost``."""

    def __init__(self, cfg: EvalConfig, harness: set[tuple[str, str]] = frozenset(), lost: set[tuple[str, str]] = frozenset()):
        self.cfg, self.harness, self.lost = cfg, harness, lost
        self.ran: list[str] = []

    def __enter__(self) -> VerdictExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def where(self) -> str:
        return "the test's verdicts"

    def run(self, jobs: Sequence[Job], sink: RecordSink, notes: provenance.SessionLog, label: str = "eval") -> RunStats:
        notes.start(provenance.collect(self.cfg, None))
        for job in jobs:
            key = (job.task.id, job.sample_id)
            outcome, failure = Outcome(), None
            if key in self.harness:
                failure = StageFailure(Status.HARNESS_ERROR, ErrorKind.INTERNAL, "the kit failed")
            elif key in self.lost:
                failure = StageFailure(Status.WORKER_LOST, ErrorKind.INTERNAL, "the worker died")
            elif job.sample_id in VERDICTS:
                failure = StageFailure(VERDICTS[job.sample_id], ErrorKind.NONE, job.sample_id)
            else:
                outcome = Outcome(timing=TimingOutcome(candidate_samples_ms=(0.8,), candidate_ms=0.8,
                                                       native_samples_ms=(1.0,), native_ms=1.0, speedup=1.25,
                                                       speedup_ci_low=1.2, speedup_ci_high=1.3))
            sink.append("w0", job_record(job, Where(worker="w0", started_at=now_utc()), outcome, failure))
            self.ran.append(job.job_id)
        return RunStats(workers=1, ran=len(jobs), work_s=0.0)


def _summary(cfg: EvalConfig) -> dict:
    tasks = load_suite(cfg.tasks.dir, "all")
    return metrics.summary(read_records(cfg.run.dir), tasks, boot=metrics.Bootstrap(n=10)).row(0, named=True)


def _report_totals(report_dir) -> dict:
    """The report's harness-error tasks, harness errors and correct tasks over its rows (one per split)."""
    rows = json.loads((report_dir / "report.json").read_text())["summary"]
    return {"harness_error_tasks": sorted(t for r in rows for t in r["harness_error_tasks"]),
            "n_harness_errors": sum(r["n_harness_errors"] for r in rows), "n_correct": sum(r["n_correct"] for r in rows)}


def test_a_resumed_eval_retries_harness_errors_only_and_the_retry_counts(tmp_path, capsys):
    path = tmp_path / "cfg.toml"
    path.write_text(fixture_config_text(tmp_path / "run", cache_dir=tmp_path / "cache"))
    cfg = load_config(path)
    tasks = load_suite(cfg.tasks.dir, "all")
    all_ids = {t.id for t in tasks}
    # every sample of fx_exp fails with a harness error, so does fx_sub's correct one; fx_argmax's crash
    # loses its worker (the candidate may be what kills it: not retried)
    harness = {("fx_exp", s) for s in ("correct", "compile_error", "wrong_result", "crash")} | {("fx_sub", "correct")}
    first = VerdictExecutor(cfg, harness=harness, lost={("fx_argmax", "crash")})
    assert evaluate(cfg, first) == 0
    out = capsys.readouterr().out
    assert len(first.ran) == 16
    assert "(4 tasks, 5 harness errors: rerun to retry; geomean 1.25x over the 2 with a speedup)" in out
    s = _summary(cfg)
    assert (s["n_harness_errors"], s["harness_error_tasks"], s["n_missing"]) == (5, ["fx_exp"], 1)
    assert (s["fcr"], s["fast_1.0"]) == (0.5, 0.5)  # fx_argmax, fx_transpose; fx_sub's correct one failed
    rep = _report_totals(cfg.run.dir / "report")
    assert rep == {"harness_error_tasks": ["fx_exp"], "n_harness_errors": 5, "n_correct": 2}
    md = (cfg.run.dir / "report" / "report.md").read_text()
    assert "## Tasks left with only harness errors" in md and "| sample | fx_exp |" in md

    # the resume set leaves out exactly the jobs recorded only as harness errors
    plan = plan_jobs(cfg, tasks, all_ids, None)
    assert sorted((j.task.id, j.sample_id) for j in plan.pending) == sorted(harness)
    assert len(rundir.recorded_jobs(cfg.run.dir, [])) == 11

    second = VerdictExecutor(cfg)
    assert evaluate(cfg, second) == 0
    out = capsys.readouterr().out
    assert "16 jobs, 11 already recorded" in out and "5 to run" in out
    assert sorted(second.ran) == sorted(j.job_id for j in plan.pending)
    assert scan(cfg.run.dir, dedupe=False).collect().height == 21  # the harness errors stay in the shards
    s = _summary(cfg)
    # the retries count: fx_exp and fx_sub now have correct samples; the worker_lost record stands
    assert (s["n_harness_errors"], s["harness_error_tasks"], s["n_missing"]) == (0, [], 0)
    assert (s["fcr"], s["fast_1.0"], s["n_with_speedup"]) == (1.0, 1.0, 4)
    line = "sample: CSR 100.0% FCR 100.0% fast_0 100.0%"
    assert line in out and "harness error" not in out
    merged = pl.read_parquet(cfg.run.dir / "results.parquet")
    assert merged.height == 16 and Status.HARNESS_ERROR.value not in merged["status"].to_list()

    # mkb report reads the same deduplicated records
    assert main(["report", str(cfg.run.dir), "--out", str(tmp_path / "rep"), "--tasks-dir", str(cfg.tasks.dir)]) == 0
    assert _report_totals(tmp_path / "rep") == {"harness_error_tasks": [], "n_harness_errors": 0, "n_correct": 4}

    third = VerdictExecutor(cfg)
    evaluate(cfg, third)
    assert third.ran == [] and "16 jobs, 16 already recorded" in capsys.readouterr().out
