"""The throughput benchmark's parts (kit.bench.throughput), cheaply: its configs on the fixture engine load and
plan one job per sample at the protocol asked, and its split of the job time adds up over real records."""

from __future__ import annotations

import tomllib

import pytest

from kit.bench.common import default_protocol
from kit.bench.throughput import (
    DEFAULT_CONFIG,
    MIN_ROUNDS,
    print_table,
    protocols,
    summarize,
    write_run_config,
)
from kit.job.record import Job, job_record
from kit.results.outcomes import BuildOutcome, Outcome, StageFailure, TimingOutcome, VerifyOutcome, Where
from kit.results.records import ErrorKind, Status, Trial
from kit.run.plan import make_jobs
from kit.settings.config import load_config
from kit.suite.tasks import load_suite


@pytest.fixture(autouse=True)
def _fixture_engine(monkeypatch):
    monkeypatch.delenv("MKB_MNN__SOURCE_DIR", raising=False)  # the benchmark's fixture-engine configs


def test_the_protocols_are_the_default_configs_and_the_fewest_rounds(tmp_path):
    default = default_protocol()
    cfg = load_config(DEFAULT_CONFIG)
    assert default["timing"] == dict(tomllib.loads(DEFAULT_CONFIG.read_text())["timing"])
    assert default["verify"]["trials"] == cfg.verify.trials
    both = protocols()
    assert both["default"] == default
    fewest = both[f"{MIN_ROUNDS} rounds"]
    assert fewest["timing"] == {**default["timing"], "rounds": MIN_ROUNDS} and fewest["verify"] == default["verify"]
    assert cfg.timing.rounds_min > MIN_ROUNDS and load_config(
        write_run_config(tmp_path, tmp_path, tmp_path / "run", 1, fewest)).timing.rounds_max == MIN_ROUNDS


def test_a_run_config_plans_every_sample_at_the_protocol_and_workers_asked(tmp_path, fixture_candidates_dir):
    cands = fixture_candidates_dir / "sample"
    path = write_run_config(tmp_path, cands, tmp_path / "run-0", 2, protocols()[f"{MIN_ROUNDS} rounds"])
    cfg = load_config(path)
    assert cfg.run.dir == tmp_path / "run-0" and cfg.dispatch.workers == 2 and cfg.dispatch.mode == "ray"
    assert cfg.timing.rounds == MIN_ROUNDS and cfg.timing.iterations == default_protocol()["timing"]["iterations"]
    assert cfg.mnn.engine == "fixture" and not cfg.report.enabled
    tasks = load_suite(cfg.tasks.dir, cfg.tasks.split, cfg.tasks.ids or None)
    jobs, _ = make_jobs(cfg, tasks, {t.id for t in tasks}, None)
    samples = [d for t in cands.iterdir() for d in t.iterdir() if d.is_dir()]
    assert len(jobs) == len(samples) > 0


def _record(job: Job, status: Status, wall_s: float, build_s: float, verify_s: float | None, timing_s: float | None):
    out = Outcome(build=BuildOutcome(build_s=build_s), phases={"setup": 0.25, "build": build_s})
    if verify_s is not None:
        out.add(VerifyOutcome(trials=(Trial(seed=1, ok=status == Status.OK),), convert_s=0.5, verify_s=verify_s))
    if timing_s is not None:
        out.add(TimingOutcome(candidate_samples_ms=(1.0, 1.0), candidate_ms=1.0, native_ms=2.0, speedup=2.0, rounds=2,
                              timing_s=timing_s))
    failure = None if status == Status.OK else StageFailure(status, ErrorKind.VALUE, "differs")
    return job_record(job, Where(), out, failure, wall_s=wall_s)


def test_the_job_time_splits_into_stages_and_what_lies_outside_them(fixture_tasks_dir, capsys):
    task = load_suite(fixture_tasks_dir)[0]
    job = Job(task, "sample", "s", "0" * 64, "d", files={})
    rows = [_record(job, Status.OK, 20.0, 4.0, 1.0, 12.0).to_row(),
            _record(job, Status.VERIFY_MISMATCH, 7.0, 4.0, 1.5, None).to_row(),
            _record(job, Status.OK, 10.0, 3.0, 1.0, None).to_row()]  # correct, not timed
    run = summarize(rows, "default", 2, end_to_end_s=60.0, work_s=45.0)
    assert run.n == 3 and run.statuses == {"ok": 2, "verify_mismatch": 1}
    assert run.split_s["build"] == pytest.approx(11.0)
    assert run.split_s["verify"] == pytest.approx(3.5 + 1.5)  # conversions counted with the trials
    assert run.split_s["timing"] == pytest.approx(12.0)
    assert run.split_s["outside"] == pytest.approx(37.0 - 11.0 - 5.0 - 12.0)
    assert run.job_s == pytest.approx(37.0)
    assert run.per_hour == pytest.approx(180.0) and run.work_per_hour == pytest.approx(240.0)
    assert run.ok_wall_s == [20.0, 10.0] and run.ok_timing_s == pytest.approx(12.0)
    assert run.phases_s["setup_s"] == pytest.approx(0.75) and run.phases_s["build_s"] == pytest.approx(11.0)
    print_table([run, summarize(rows[:1], "2 rounds", 1, 30.0, 20.0)])
    table = capsys.readouterr().out
    assert "outside" in table and "phase setup_s" in table and "DIFFER" in table
