"""Adaptive timing rounds: the repeated confidence intervals hold over all looks (simulated, fixed seed), the
stopping rule, the plan of looks, the config's fixed ``rounds``, and a fixture-engine timing whose records say
how many rounds ran and why they stopped."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest_fixture import FIXTURE_ROOT
from evalcfg import write_config

from kit.settings.config import load_config
from kit.settings.sections import TimingSection
from kit.stages import runplan, sequential
from kit.stages import speedup as sspeedup
from kit.stages.timing import TimingOptions


def test_one_look_is_the_paired_t_interval():
    """With one look (the fixed protocol) the RCI is the Student t-interval of the paired log ratios."""
    rng = np.random.default_rng(7)
    d = rng.normal(0.1, 0.05, 10)
    assert sequential.boundaries((10,), 0.05)[0] == pytest.approx(1.959964, abs=1e-6)
    lo, hi = sequential.rci(d, (10,), 0.95)
    want = sspeedup.paired_interval(d, 0.95)
    assert (lo, hi) == pytest.approx(want, rel=1e-9)


def test_the_boundaries_spend_alpha_by_the_power_family():
    """Under the null, crossing the boundaries of looks (6, 10) happens with the spent probabilities: at the first
    look alpha(0.6), by the last look alpha (Monte Carlo, 200,000 sequences of 10 standard normals)."""
    c = sequential.boundaries((6, 10), 0.05)
    x = np.random.default_rng(1).standard_normal((200_000, 10))
    z1, z2 = x[:, :6].sum(1) / math.sqrt(6), x.sum(1) / math.sqrt(10)
    first = float(np.mean(np.abs(z1) >= c[0]))
    either = float(np.mean((np.abs(z1) >= c[0]) | (np.abs(z2) >= c[1])))
    assert first == pytest.approx(sequential.spent(0.6, 0.05), abs=0.001) == pytest.approx(0.05 * 0.6**6)
    assert either == pytest.approx(0.05, abs=0.003)
    assert c[0] > c[1] > 1.959964  # conservative early, a little wider than fixed at the end ...
    assert c[1] < 1.959964 * 1.002  # ... by less than 0.2 %


def _coverage(looks: tuple[int, ...], sd: float, trials: int, rng: np.random.Generator) -> tuple[float, float]:
    """Share of simulated timings (true log speedup 0.2, round noise ``sd``) whose RCIs at *every* look contain
    the truth, and share of those stopped by the rule whose interval at the stopping look contains it."""
    truth = 0.2
    every = stopped_ok = 0
    for _ in range(trials):
        d = rng.normal(truth, sd, looks[-1])
        cis = [sequential.rci(d[:n], looks, 0.95) for n in looks]
        every += all(lo <= truth <= hi for lo, hi in cis)
        for lo, hi in cis:  # the rule: the first look that decides or is narrow, else the last
            s = math.exp((lo + hi) / 2)
            if sequential.stop_reason((math.exp(lo), math.exp(hi)), s, (0, 0.5, 1, 1.5, 2), 0.05):
                break
        stopped_ok += lo <= truth <= hi
    return every / trials, stopped_ok / trials


def test_repeated_intervals_keep_their_coverage_whatever_look_stops():
    """The RCIs of looks (3, 7, 10) cover the true speedup at all looks at once in >= 94 % of 3,000 simulated
    timings (95 % nominal; Monte Carlo error ~0.4 %), so the interval where the rule stopped does too; the naive
    t-intervals at the same looks, taken at the first look that excludes the truth, do not."""
    rng = np.random.default_rng(2026)
    every, stopped = _coverage((3, 7, 10), sd=0.08, trials=3000, rng=rng)
    assert every >= 0.94 and stopped >= every
    d = rng.normal(0.2, 0.08, (3000, 10))
    naive_all = np.mean([all(lo <= 0.2 <= hi for lo, hi in (sspeedup.paired_interval(r[:n], 0.95) for n in (3, 7, 10)))
                         for r in d])
    assert naive_all < 0.93  # what the RCIs correct for


def test_stop_reasons():
    thresholds = (0.0, 0.5, 1.0, 1.5, 2.0)
    assert sequential.stop_reason((0.21, 0.25), 0.23, thresholds, 0.05) == sequential.STOP_DECIDED
    assert sequential.stop_reason((2.1, 3.5), 2.5, thresholds, 0.05) == sequential.STOP_DECIDED
    assert sequential.stop_reason((0.99, 1.01), 1.0, thresholds, 0.05) == sequential.STOP_WIDTH
    assert sequential.stop_reason((0.9, 1.1), 1.0, thresholds, 0.05) is None
    assert sequential.stop_reason((0.45, 0.55), 0.5, thresholds, 0.05) is None  # straddles 0.5


def test_plan_of_looks_and_run_order():
    assert runplan.looks(6, 4, 10) == (6, 10)
    assert runplan.looks(3, 4, 10) == (3, 7, 10)
    assert runplan.looks(10, 4, 10) == (10,)
    assert runplan.batches((6, 10)) == [range(0, 6), range(6, 10)]
    # the order alternates over the whole timing: round 7 (odd) starts with the candidate
    assert runplan.run_order(range(6, 8), True) == [("native", 6), ("candidate", 6), ("candidate", 7), ("native", 7)]
    assert runplan.run_order(range(0, 2), False) == [("candidate", 0), ("candidate", 1)]
    assert TimingOptions(rounds=10).looks() == (10,)
    assert TimingOptions(rounds=10, rounds_min=6).looks() == (6, 10)


def test_fixed_rounds_config_keeps_its_protocol_and_digest(tmp_path):
    """``rounds = N`` (configs before adaptive rounds, a bundle's) is the fixed protocol, and its digest payload is
    the section as it was; an adaptive first look below 3 rounds is refused naming the fields."""
    fixed = TimingSection(rounds=10)
    assert (fixed.rounds_min, fixed.rounds_max) == (10, 10)
    payload = fixed.digest_payload([1.0])
    assert payload["rounds"] == 10 and not set(payload) & {"rounds_min", "rounds_max", "stop_width", "stop_thresholds"}
    adaptive = TimingSection().digest_payload([1.0, 3.0])
    assert "rounds" not in adaptive and adaptive["stop_thresholds"] == [0.0, 0.5, 1.0, 1.5, 2.0, 3.0]
    path = tmp_path / "c.toml"
    path.write_text("[timing]\nrounds_min = 2\n")
    with pytest.raises(Exception, match="timing.rounds_min"):
        load_config(path)


@pytest.mark.slow
def test_calibration_records_say_how_many_rounds_ran_and_why(tmp_path, fixture_engine_pristine, fixture_tasks_dir,
                                                            capsys):
    """A/A on the fixture engine with looks (3, 5): a stop width no interval misses stops every timed task at the
    first look (``width``) unless it was decided, and the recorded interval is the RCI of its rounds at that
    look; the calibration summary prints the median number of rounds."""
    from kit.cli import main  # noqa: PLC0415
    from kit.results.shards import read_records  # noqa: PLC0415

    ids = ["fx_exp", "fx_argmax"]
    cfg = write_config(tmp_path / "cfg.toml", run_dir=tmp_path / "run", tasks_dir=fixture_tasks_dir, ids=ids,
                       method="sample", candidates=FIXTURE_ROOT / "candidates" / "sample",
                       mnn={"engine": "fixture", "source_dir": fixture_engine_pristine, "cache_dir": tmp_path / "cache"},
                       verify={"trials": 2, "extra_threads": []},
                       # the first look's interval is ~20.7 sd/sqrt(3) wide on each side (log scale): 1e9 needs the 3
                       # rounds' log ratios at an sd of 1.7 to be missed, 100 only 0.39 (missed on a loaded 2-core host)
                       timing={"warmup": 1, "iterations": 5, "rounds_min": 3, "rounds_step": 2, "rounds_max": 5,
                               "stop_width": 1e9})
    assert main(["calibrate", "--config", str(cfg)]) == 0
    summary = json.loads((tmp_path / "run" / "calibration.json").read_text())["summary"]
    assert "median 3 rounds" in capsys.readouterr().out and summary["rounds_median"] == 3
    rows = list(read_records(tmp_path / "run" / "calibration").iter_rows(named=True))
    assert sorted(r["task_id"] for r in rows) == sorted(ids)
    for r in rows:
        assert r["status"] == "ok", r["error_message"]
        assert r["timing_rounds"] == 3 and r["timing_stop"] in (sequential.STOP_WIDTH, sequential.STOP_DECIDED)
        assert sorted(set(r["native_samples_round"])) == [0, 1, 2]
        cmed = sspeedup.round_medians(r["candidate_samples_ms"], r["candidate_samples_round"])
        nmed = sspeedup.round_medians(r["native_samples_ms"], r["native_samples_round"])
        lo, hi = sequential.rci(np.log(nmed) - np.log(cmed), (3, 5), 0.95)
        assert (r["speedup_ci_low"], r["speedup_ci_high"]) == pytest.approx((math.exp(lo), math.exp(hi)), rel=1e-6)
