"""The timing statistic (kit.stages.speedup, kit.stages.timing._outcome): round medians, the paired t-interval on
the log scale, and what the outcome of a timing says (untimeable, implausible), on hand-made samples."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest_fixture import FIXTURE_ROOT
from scipy import stats

from kit.host import proc
from kit.mnn.runner import RunResult
from kit.results.records import IMPLAUSIBLE_SPEEDUP
from kit.stages import speedup as sp
from kit.stages import timing as st
from kit.suite.tasks import load_suite


def test_round_medians_in_round_order():
    x = [5.0, 1.0, 3.0, 10.0, 30.0, 20.0]
    r = [1, 1, 1, 0, 0, 0]
    assert sp.round_medians(x, r).tolist() == [20.0, 3.0]
    with pytest.raises(ValueError):
        sp.round_medians([1.0], [0, 1])


def test_estimate_is_the_paired_t_interval_on_the_log_scale():
    native = np.array([2.0, 2.2, 1.9, 2.1])
    cand = np.array([1.0, 1.0, 1.0, 1.05])
    e = sp.estimate(cand, native, 0.95)
    d = np.log(native) - np.log(cand)
    half = stats.t.ppf(0.975, 3) * d.std(ddof=1) / 2  # sqrt(4) rounds
    assert e.speedup == pytest.approx(math.exp(d.mean()))
    assert e.native_ms / e.candidate_ms == pytest.approx(e.speedup)  # geometric means of the round medians
    assert e.native_ms == pytest.approx(math.exp(np.log(native).mean()))
    assert (e.ci_low, e.ci_high) == pytest.approx((math.exp(d.mean() - half), math.exp(d.mean() + half)))
    # one round: a speedup, no interval; no native side: only the candidate's time
    one = sp.estimate(cand[:1], native[:1])
    assert one.speedup == pytest.approx(2.0) and one.ci_low is None and one.ci_high is None
    alone = sp.estimate(cand, None)
    assert alone.native_ms is None and alone.speedup is None
    with pytest.raises(ValueError):
        sp.estimate(cand, native[:3])


def _aa_tasks(rng: np.random.Generator, tasks: int, rounds: int, iters: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Native-vs-native timings whose variation is mostly between runs (a process's level, log-normal, 3 %)
    with autocorrelated noise inside a run, as measured on MNN: (native, candidate) round medians per task."""
    out = []
    for _ in range(tasks):
        base = rng.uniform(0.05, 5.0)
        sides = []
        for _side in range(2):
            med = []
            for _r in range(rounds):
                level = base * math.exp(rng.normal(0, 0.03))
                walk = np.cumsum(rng.normal(0, 0.002, iters))
                med.append(np.median(level * np.exp(walk + rng.normal(0, 0.01, iters))))
            sides.append(np.array(med))
        out.append((sides[0], sides[1]))
    return out


def test_the_interval_covers_one_for_95_percent_of_aa_timings():
    """The property `mkb calibrate` measures on a real tree: on simulated A/A timings (seeded) the 95 %
    interval contains 1.0 for 95 % of the tasks (within the binomial spread of 2000 tasks), while an interval
    that resamples single iterations (the old method) covers far fewer."""
    rng = np.random.default_rng(20261201)
    hits = []
    for native, cand in _aa_tasks(rng, 2000, rounds=10, iters=30):
        e = sp.estimate(cand, native, 0.95)
        hits.append(e.ci_low <= 1.0 <= e.ci_high)
    coverage = float(np.mean(hits))
    assert 0.935 <= coverage <= 0.965, coverage


def _run(op_ms: list[float], op_types: dict[str, int] | None = None) -> RunResult:
    res = proc.ProcResult(("runner",), 0, "", "", 0.1)
    return RunResult(True, {}, op_ms, [x * 1.1 for x in op_ms], op_types or {"Softmax": 1}, "", res)


def _task():
    return load_suite(FIXTURE_ROOT / "tasks", "all")[0]


def test_outcome_keeps_every_sample_with_its_round_and_flags_implausible_speedups():
    opts = st.TimingOptions(iterations=3, rounds=2, implausible_speedup=10.0)
    cand = [_run([0.10, 0.11, 0.09]), _run([0.10, 0.12, 0.10])]
    native = [_run([2.0, 2.1, 1.9]), _run([2.0, 2.0, 2.2])]
    out = st._outcome(_task(), cand, native, opts)
    assert out.candidate_samples_round == (0, 0, 0, 1, 1, 1) and out.native_samples_round == (0, 0, 0, 1, 1, 1)
    assert out.rounds == 2 and out.speedup == pytest.approx(math.sqrt((2.0 / 0.10) * (2.0 / 0.10)))
    assert [f.code for f in out.flags] == [IMPLAUSIBLE_SPEEDUP] and "above timing.implausible_speedup" in out.flags[0].reason
    assert not out.untimeable
    plausible = st._outcome(_task(), cand, [_run([0.2, 0.21, 0.19]), _run([0.2, 0.2, 0.22])], opts)
    assert plausible.flags == () and 1.5 < plausible.speedup < 2.5


def test_outcome_of_a_too_short_native_op_is_untimeable():
    opts = st.TimingOptions(iterations=2, rounds=2, min_native_ms=0.005)
    out = st._outcome(_task(), [_run([0.002, 0.002]), _run([0.002, 0.003])], [_run([0.004, 0.004]), _run([0.004, 0.004])],
                      opts)
    assert out.untimeable and out.speedup is not None
    assert not st._outcome(_task(), [_run([0.002, 0.002])] * 2, [_run([0.006, 0.006])] * 2, opts).untimeable


def test_sides_with_other_op_types_fall_back_to_the_whole_model():
    opts = st.TimingOptions(iterations=2, rounds=2)
    cand = [_run([1.0, 1.0], {"Raster": 2})] * 2
    native = [_run([2.0, 2.0], {"Softmax": 1})] * 2
    out = st._outcome(_task(), cand, native, opts)
    assert out.basis == "model" and out.candidate_samples_ms == (1.1, 1.1, 1.1, 1.1)


# -- symmetric invocation ------------------------------------------------------------------------------------
def _call(tmp_path, tag: str, lib: str, settings=None, env=None):
    from dataclasses import replace

    from kit.mnn.runner import RunnerCall, RunSettings

    for d in ("a", "b"):
        (tmp_path / d).mkdir(exist_ok=True)
        (tmp_path / d / "libMNN.so").write_bytes(b"")
    (tmp_path / "runner").write_bytes(b"")
    (tmp_path / f"{tag}.mnn").write_bytes(b"")
    settings = settings or RunSettings(threads=1, iterations=5, cpus=(0,))
    return RunnerCall.prepare(tmp_path / "runner", tmp_path / f"{tag}.mnn", {"x": np.zeros(3, np.float32)}, ["y"],
                         tmp_path / lib, replace(settings, env=env) if env is not None else settings,
                         scratch=tmp_path / f"scratch-{tag}")


def test_the_invocation_digest_leaves_out_only_model_libraries_and_directories(tmp_path):
    from dataclasses import replace

    from kit.mnn.runner import RunSettings

    base = RunSettings(threads=1, iterations=5, cpus=(0,))
    native = _call(tmp_path, "native", "a", base).invocation_sha256()
    assert _call(tmp_path, "cand", "b", base).invocation_sha256() == native  # other model, libraries, scratch
    for other in (replace(base, threads=2), replace(base, cpus=(1,)), replace(base, iterations=6),
                  replace(base, timeout_s=1.0), replace(base, memory_limit_bytes=1 << 30)):
        assert _call(tmp_path, "cand", "b", other).invocation_sha256() != native, other
    assert _call(tmp_path, "cand", "b", base, env={"PATH": "/bin", "OMP_NUM_THREADS": "4"}).invocation_sha256() != native


def test_asymmetric_runs_are_refused():
    import os
    from types import SimpleNamespace

    def run(sha: str):
        from kit.host.machine import allowed_cores

        return SimpleNamespace(invocation_sha256=sha, waiting=SimpleNamespace(pid=os.getpid()),
                               allowed_cores=lambda: allowed_cores(os.getpid()))

    plan = [("native", 0), ("candidate", 0), ("candidate", 1), ("native", 1)]
    assert st.check_symmetric(plan, [run("a")] * 4, ()) == {"native": "a", "candidate": "a"}
    with pytest.raises(st.AsymmetricTiming, match="invoked differently"):
        st.check_symmetric(plan, [run("a"), run("a"), run("b"), run("a")], ())
    usable = tuple(__import__("kit.host.machine", fromlist=["x"]).usable_cores())
    if len(usable) > 1:  # this process may run on more cores than the timing cores: refused
        with pytest.raises(st.AsymmetricTiming, match="not only the timing cores"):
            st.check_symmetric(plan, [run("a")] * 4, usable[:1])
    assert st.check_symmetric(plan, [run("a")] * 4, usable)["native"] == "a"
