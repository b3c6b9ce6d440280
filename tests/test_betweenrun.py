"""The between-run component (kit/score/betweenrun.py): the DerSimonian-Laird estimate recovers a known tau from
simulated runs, and a cross-run comparison counts it (issue 27)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kit.score import betweenrun as br


def _simulate(tau: float, tasks: int, runs: int, seed: int) -> dict[str, list[tuple[float, float]]]:
    """Per task, ``runs`` separate runs: a true log speedup, a run effect N(0, tau^2) and a within-run error whose
    se is drawn per run (as rounds give it)."""
    rng = np.random.default_rng(seed)
    out = {}
    for j in range(tasks):
        mu = rng.normal(0, 0.5)
        pts = []
        for _ in range(runs):
            se = rng.uniform(0.01, 0.05)
            pts.append((mu + rng.normal(0, tau) + rng.normal(0, se), se))
        out[f"t{j}"] = pts
    return out


@pytest.mark.parametrize("tau", [0.0, 0.03, 0.06, 0.12])
def test_estimator_recovers_a_known_tau(tau):
    est = br.estimate(_simulate(tau, tasks=40, runs=5, seed=int(tau * 1000)))
    got = est["pooled"]["log_sd_raw"]
    assert abs(got - tau) < 0.015 + 0.15 * tau, (tau, got)
    assert est["pooled"]["tasks"] == 40 and est["pooled"]["df"] == 160
    assert est["pooled"]["log_sd"] >= br.FLOOR_LOG_SD
    assert set(est["tasks"]) == {f"t{j}" for j in range(40)}  # 5 runs each: per-task figures too


def test_few_runs_give_only_the_pooled_figure_and_one_run_none():
    data = _simulate(0.05, tasks=10, runs=3, seed=1)
    est = br.estimate(data)
    assert est["tasks"] == {} and est["pooled"]["runs"] == 3
    assert br.estimate({k: v[:1] for k, v in data.items()})["pooled"] is None


def test_table_rounds_give_a_point_per_run():
    m, se = br.points_from_rounds([1.0, 1.1, 0.9, 1.0])
    assert m == pytest.approx(np.mean(np.log([1.0, 1.1, 0.9, 1.0])))
    assert se == pytest.approx(np.std(np.log([1.0, 1.1, 0.9, 1.0]), ddof=1) / 2)
    assert br.points_from_rounds([1.0]) is None


# issue 27: layernorm's correct sample, the same host 30 minutes apart
BUNDLE, REPRO = (0.231, 0.21, 0.253), (0.19, 0.176, 0.205)


def test_the_layernorm_pair_is_within_noise_with_a_realistic_tau_not_without():
    assert br.differ(BUNDLE, REPRO, tau=0.0)
    assert not br.differ(BUNDLE, REPRO, tau=br.DEFAULT_LOG_SD)


def test_a_candidate_20_percent_slower_still_differs_at_that_tau():
    """Made 20 % slower (time x 1.2, speedup / 1.2): different at the default tau where the intervals are as tight
    as the adaptive rule leaves the sample set's (+-3 %), also at transpose's own between-run sd (0.047, 6 runs);
    with layernorm's +-9 % of the older protocol only a 25 % slower one is."""
    tight = (1.545, 1.50, 1.59)
    for tau in (br.DEFAULT_LOG_SD, 0.047, br.FLOOR_LOG_SD):
        assert br.differ(tight, tuple(x / 1.2 for x in tight), tau=tau)
    assert not br.differ(BUNDLE, tuple(x / 1.2 for x in BUNDLE), tau=br.DEFAULT_LOG_SD)
    assert br.differ(BUNDLE, tuple(x * 0.8 for x in BUNDLE), tau=br.DEFAULT_LOG_SD)
    assert br.differ(REPRO, tuple(x * 0.8 for x in REPRO), tau=br.DEFAULT_LOG_SD)


def test_the_detectable_change_is_the_least_change_a_comparison_calls_different():
    """Intervals of +-3 %: the two half-widths (0.06) decide at tau 0.01, the between-run term at transpose's 0.047;
    a speedup changed by just more than the figure is different, by just less not."""
    a = (1.5, 1.5 / math.exp(0.03), 1.5 * math.exp(0.03))
    low = br.detectable_change(a, a, tau=0.01)
    assert low == pytest.approx(math.expm1(0.06))
    high = br.detectable_change(a, a, tau=0.047)
    se = 0.03 / 1.959964
    assert high == pytest.approx(math.expm1(1.959964 * math.sqrt(2 * se * se + 2 * 0.047**2)), rel=1e-5)
    for tau, change in ((0.01, low), (0.047, high)):
        assert br.differ(a, tuple(x / (1 + change) / 1.001 for x in a), tau)
        assert not br.differ(a, tuple(x / (1 + change) * 1.001 for x in a), tau) or tau == 0.01


def test_groups_of_one_task_each_keep_their_mean_and_give_the_task_one_figure():
    """An A/A pair and a candidate of the same task, 3 runs each (2 + 2 degrees of freedom, >= 4: the task's own
    figure); the candidate sits far from the A/A pair's mean without that counting as between-run movement."""
    aa = [(0.0, 0.01), (0.02, 0.01), (-0.02, 0.01)]
    cand = [(0.5, 0.01), (0.52, 0.01), (0.48, 0.01)]
    est = br.estimate({"t@aa": aa, "t@m/s/abc": cand, "u": [(0.1, 0.01), (0.1, 0.01)]})
    assert set(est["tasks"]) == {"t"} and est["tasks"]["t"]["runs"] == 6
    assert est["tasks"]["t"]["log_sd_raw"] == pytest.approx(math.sqrt((0.0016 * 1e4 - 4) / (2 * (3e4 - 1e4))), rel=1e-6)
    assert est["pooled"]["tasks"] == 2 and est["pooled"]["df"] == 5
    assert br.estimate({"t@aa": aa[:3], "t@m": cand[:2]})["tasks"] == {}  # 3 degrees of freedom: pooled only


def test_an_evaluation_run_gives_one_point_per_candidate_with_a_usable_speedup():
    from kit.results.records import Record, Status
    from kit.results.shards import records_frame

    rows = [("a", "s", Status.OK, 1.2, 1.1, 1.3), ("a", "k", Status.OK, 0.5, 0.45, 0.55),
            ("b", "s", Status.OK, 2.0, None, None), ("c", "s", Status.VERIFY_MISMATCH, None, None, None)]
    recs = records_frame([Record(job_id=f"{t}-{s}", method="m", task_id=t, sample_id=s, config_digest="d",
                                 candidate_sha256=str(i + 1) * 64, status=st, speedup=v, speedup_ci_low=lo,
                                 speedup_ci_high=hi) for i, (t, s, st, v, lo, hi) in enumerate(rows)])
    pts = br.points_from_records(recs)
    assert set(pts) == {"a@m/s/111111111111", "a@m/k/222222222222"}  # b: no interval; c: not ok
    assert pts["a@m/s/111111111111"] == pytest.approx((math.log(1.2), math.log(1.3 / 1.1) / (2 * 1.959964)), rel=1e-5)


def test_tau_from_a_calibration_file_per_task_then_pooled_then_none():
    data = {"between_run": {"pooled": {"log_sd": 0.04, "runs": 3}, "tasks": {"a": {"log_sd": 0.07, "runs": 5}}}}
    assert br.from_calibration(data, "a", "f").log_sd == 0.07
    t = br.from_calibration(data, "b", "f")
    assert (t.log_sd, t.scope, t.runs) == (0.04, "pooled", 3)
    assert br.from_calibration({"summary": {}}, "a", "f") is None
    assert "default" in br.default_tau().text() and math.isclose(br.default_tau().log_sd, br.DEFAULT_LOG_SD)


def _table_entries(root, tau: float, runs: int, seed: int = 0):
    """A baseline table of 6 tasks, each measured by ``runs`` separate run directories: a run effect N(0, tau^2)
    on the log time and 10 rounds of within-run noise (sd 0.03) each."""
    from kit.baselines import table as btable
    from kit.baselines.key import BaselineKey, RunnerSettings

    key = BaselineKey({"device": "host", "cpu_model": "CPU A", "arch": "x86_64", "cpus": 2}, "3.2.2", "n1",
                      RunnerSettings(threads=1, precision="high", warmup=10, iterations=30))
    rng = np.random.default_rng(seed)
    for j in range(6):
        base = math.log(0.5 + j)
        for i in range(runs):
            rounds = np.exp(base + rng.normal(0, tau) + rng.normal(0, 0.03, 10)).tolist()
            btable.add_entry(root, key, btable.Entry(
                task_id=f"t{j}", task_sha256="d", native_ms=float(np.exp(np.mean(np.log(rounds)))),
                native_model_ms=1.0, native_round_ms=rounds, native_model_round_ms=rounds, native_op_types={"X": 1},
                rounds=10, recorded_at=f"2026-01-0{i + 1}T00:00:00", source=f"/runs/r{i}", job_id="j", method="native"))
    return key.key


def test_the_baseline_tables_give_the_native_times_between_run_sd(tmp_path):
    from kit.baselines.drift import between_run
    from kit.baselines.table import read_table, table_path

    key = _table_entries(tmp_path, tau=0.08, runs=6)
    est = between_run(read_table(table_path(tmp_path, key)))
    assert abs(est["pooled"]["log_sd_raw"] - 0.08) < 0.03, est["pooled"]
    assert set(est["tasks"]) == {f"t{j}" for j in range(6)} and est["pooled"]["df"] == 30


def test_a_reproduction_uses_the_calibrations_figure_for_a_paired_speedup_the_larger_for_a_table_timed_one(tmp_path):
    import json

    import polars as pl

    from kit.baselines.between import resolver

    run_dir, bundle, tables = tmp_path / "rep", tmp_path / "bundle", tmp_path / "tables"
    for d in (run_dir, bundle, tables):
        d.mkdir()
    recs = pl.DataFrame({"task_id": ["t0"], "baseline_key": [""]})
    tau = resolver([run_dir, bundle], recs, tables)("t0")
    assert tau.scope == "default" and tau.log_sd == br.DEFAULT_LOG_SD and "mkb calibrate" in tau.text()
    key = _table_entries(tables, tau=0.05, runs=3)
    tau = resolver([run_dir, bundle], pl.DataFrame({"task_id": ["t0"], "baseline_key": [key]}), tables)("t0")
    assert tau.scope == "pooled" and "baseline table" in tau.source and tau.runs == 3
    table_sd = tau.log_sd
    # a bundle's calibration.json of an older kit (no between_run) is no source; one with it is
    (bundle / "calibration.json").write_text(json.dumps({"summary": {}, "tasks": []}))
    assert resolver([run_dir, bundle], recs, tables)("t0").scope == "default"
    (bundle / "calibration.json").write_text(json.dumps({"between_run": {"pooled": {"log_sd": 0.3, "runs": 4}}}))
    assert resolver([run_dir, bundle], recs, tables)("t0").source == str(bundle / "calibration.json")
    # the first calibration with a figure is the calibrations' source: this host's, its task's own figure
    (run_dir / "calibration.json").write_text(json.dumps({"between_run": {"pooled": {"log_sd": 0.02, "runs": 3},
                                                                           "tasks": {"t0": {"log_sd": 0.4, "runs": 5}}}}))
    tau = resolver([run_dir, bundle], recs, tables)("t0")
    assert (tau.log_sd, tau.scope, tau.source) == (0.4, "task", str(run_dir / "calibration.json"))
    # a paired speedup: the calibrations' figure, even where native's own times move more
    with_key = pl.DataFrame({"task_id": ["t0", "t1"], "baseline_key": [key] * 2,
                             "native_timing": ["interleaved", "interleaved"]})
    tau = resolver([run_dir, bundle], with_key, tables)("t1")  # t1: the pooled figure 0.02
    assert table_sd > 0.02 and tau.log_sd == 0.02 and tau.source == str(run_dir / "calibration.json")
    # a table-timed one: the larger of it and the tables' figure (native from another run moves on its own)
    table_timed = with_key.with_columns(native_timing=pl.lit("table"))
    tau = resolver([run_dir, bundle], table_timed, tables)("t1")
    assert tau.log_sd == pytest.approx(table_sd) and "baseline table" in tau.source
    assert resolver([run_dir, bundle], table_timed, tables)("t0").log_sd == 0.4  # t0's own figure is larger


def test_a_table_timed_interval_takes_in_two_runs_between_run_sd(tmp_path):
    """baselines.native_timing = "table": the candidate timed now, native in another run: the Welch interval
    widened to sqrt(h^2 + 2 (z tau)^2), tau the table's own (Book.native_tau) or the default."""
    from kit.baselines.book import Book
    from kit.baselines.key import RunnerSettings
    from kit.stages.speedup import unpaired_estimate
    from kit.suite.tasks import Task

    rng = np.random.default_rng(3)
    cand, nat = np.exp(rng.normal(0, 0.02, 10)), 2 * np.exp(rng.normal(0, 0.02, 10))
    plain, wide = unpaired_estimate(cand, nat), unpaired_estimate(cand, nat, between_log_sd=0.06)
    assert wide.speedup == plain.speedup
    h0, h1 = math.log(plain.ci_high / plain.ci_low) / 2, math.log(wide.ci_high / wide.ci_low) / 2
    assert h1 == pytest.approx(math.sqrt(h0**2 + 2 * (1.959964 * 0.06) ** 2), rel=1e-5)
    book = Book(tmp_path, "table", False, "3.2.2", "n1",
                RunnerSettings(threads=1, precision="high", warmup=10, iterations=30),
                hardware=lambda: {"device": "host", "cpu_model": "CPU A", "arch": "x86_64", "cpus": 2})
    task = Task(id="t0", category="unary", op_type="Exp", mechanism="atomic", split="train", mnn_op_types=["X"],
                inputs=[{"name": "x", "shape": [4]}], outputs=[{"name": "y", "shape": [4]}], mnn={"files": ["a.cpp"]})
    assert book.native_tau(task).scope == "default"  # no table yet
    book._taus.clear()
    _table_entries(tmp_path, tau=0.1, runs=6)
    tau = book.native_tau(task)
    assert tau.scope == "task" and tau.runs == 6 and 0.05 < tau.log_sd < 0.16


def _run_dir(path, speedups: dict[str, tuple[float, float, float]], cpu: str = "CPU A"):
    """A run directory with one ok record per task (speedup and interval) and a provenance naming ``cpu``."""
    import json

    from kit.results.records import Record, Status
    from kit.results.shards import ShardWriter

    path.mkdir(parents=True)
    with ShardWriter(path, "w0", flush_every=10) as w:
        for t, (v, lo, hi) in speedups.items():
            w.append(Record(job_id=f"{t}-s", method="m", task_id=t, sample_id="s", candidate_sha256="0" * 64,
                            config_digest="d", status=Status.OK, speedup=v, speedup_ci_low=lo, speedup_ci_high=hi))
    (path / "provenance.json").write_text(json.dumps({"cpu_model": cpu, "arch": "x86_64"}))


def test_the_report_of_several_runs_names_the_speedups_that_differ_with_the_sd_it_used(tmp_path):
    import json

    import polars as pl

    from kit.report.acrossruns import across_runs
    from kit.report.data import read_runs

    table = pl.DataFrame({"task_id": ["t0", "t1", "t2"], "category": ["unary"] * 3, "split": ["train"] * 3})
    _run_dir(tmp_path / "a", {"t0": BUNDLE, "t1": (1.0, 0.95, 1.05), "t2": (2.0, 1.9, 2.1)})
    _run_dir(tmp_path / "b", {"t0": REPRO, "t1": (0.8, 0.76, 0.84), "t2": (2.02, 1.9, 2.1)})
    _run_dir(tmp_path / "c", {"t0": REPRO}, cpu="CPU B")
    df, note = across_runs(read_runs([tmp_path / "a", tmp_path / "b", tmp_path / "c"], table))
    assert df["task_id"].to_list() == ["t1"]  # 20 % slower; layernorm's pair and t2 within noise
    assert "3 speedups compared; 3 with between-run sd 6.2 %, the default" in note and "other hardware): c" in note
    summary = {"aa_speedup_p05": 0.9, "aa_speedup_p95": 1.1}
    (tmp_path / "b" / "calibration.json").write_text(json.dumps(
        {"summary": summary, "tasks": [], "between_run": {"pooled": {"log_sd": 0.01, "runs": 5}}}))
    df, note = across_runs(read_runs([tmp_path / "a", tmp_path / "b"], table))
    assert df["task_id"].to_list() == ["t0", "t1"] and "pooled estimate of 5 runs" in note
    assert across_runs(read_runs([tmp_path / "a"], table))[0].height == 0
