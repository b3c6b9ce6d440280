"""The rules of a reproduction's verdict (kit.bundle.compare) on records made here: exact compile and
correctness, speedups within their intervals and the between-run sd, fast_p flips only where those agree, other
hardware; the bundled config read back exactly (kit.bundle.configs); a JSONL source bundled line for line."""

from __future__ import annotations

import json
import math
import tomllib

import pytest

from kit.bundle.compare import DIFFERENT, NOISE, SAME, SKIPPED, Between, Speedup, compare, speedup_verdict
from kit.bundle.configs import config_toml, exact_config
from kit.results.records import Record, Status
from kit.results.shards import records_frame
from kit.score.betweenrun import Tau
from kit.score.metrics import tasks_frame
from kit.settings.config import EvalConfig, load_config
from kit.suite.tasks import Task

TASKS = tasks_frame([Task(id=t, category="unary", op_type="Exp", mechanism="atomic", split="train",
                          mnn_op_types=["UnaryOp"], inputs=[{"name": "x", "shape": [4]}],
                          outputs=[{"name": "y", "shape": [4]}], mnn={"files": ["a.cpp"]}) for t in ("t1", "t2")])
PS = [0.0, 1.0]


def rec(task: str, sample: str, status: Status, speedup: float | None = None, low: float | None = None,
        high: float | None = None) -> Record:
    return Record(job_id=f"{task}-{sample}", method="m", task_id=task, sample_id=sample, candidate_sha256="0" * 64,
                  config_digest="d", status=status, speedup=speedup, speedup_ci_low=low, speedup_ci_high=high)


def frame(*records: Record):
    return records_frame(records)


def test_speedup_verdicts():
    a = Speedup(1.2, 1.1, 1.3)
    assert speedup_verdict(a, Speedup(1.25, 1.15, 1.35)) == SAME  # each inside the other's interval
    assert speedup_verdict(a, Speedup(1.45, 1.28, 1.6)) == NOISE  # the intervals overlap
    assert speedup_verdict(a, Speedup(1.6, 1.5, 1.7)) == DIFFERENT
    # within both intervals' errors and a between-run sd of 20 %: |ln 1.6/1.2| = 0.29 <= 1.96 * 0.15
    assert speedup_verdict(a, Speedup(1.6, 1.5, 1.7), tau=0.2) == NOISE


def test_the_same_records_match():
    a = frame(rec("t1", "s", Status.OK, 1.2, 1.1, 1.3), rec("t2", "s", Status.COMPILE_ERROR))
    cmp = compare(a, a, TASKS, PS)
    assert cmp.matches and {r["verdict"] for r in cmp.metrics} == {SAME}


def test_a_correctness_change_is_a_difference_named_by_candidate():
    a = frame(rec("t1", "s", Status.OK, 1.2, 1.1, 1.3), rec("t2", "s", Status.RUNTIME_CRASH))
    b = frame(rec("t1", "s", Status.VERIFY_MISMATCH), rec("t2", "s", Status.RUNTIME_CRASH))
    cmp = compare(a, b, TASKS, PS)
    assert not cmp.matches
    assert "m/t1/s: correctness correct in the bundle, verify_mismatch in the reproduction" in cmp.differences
    assert "m: fcr 0.500 -> 0.000" in cmp.differences
    row = next(r for r in cmp.candidates if r["task_id"] == "t1")
    assert (row["compile"], row["correct"], row["speedup"]) == (SAME, DIFFERENT, "n/a")


def test_a_missing_record_is_a_difference():
    a = frame(rec("t1", "s", Status.COMPILE_ERROR), rec("t1", "k", Status.COMPILE_ERROR))
    cmp = compare(a, frame(rec("t1", "s", Status.COMPILE_ERROR)), TASKS, PS)
    assert cmp.differences == ["m/t1/k: compile outcome compile_error in the bundle, no record in the reproduction"]


def test_fast_p_may_flip_only_inside_the_noise_band():
    a = frame(rec("t1", "s", Status.OK, 1.05, 0.9, 1.2), rec("t2", "s", Status.OK, 2.0, 1.9, 2.1))
    noisy = frame(rec("t1", "s", Status.OK, 0.95, 0.85, 1.1), rec("t2", "s", Status.OK, 2.0, 1.9, 2.1))
    cmp = compare(a, noisy, TASKS, PS)
    assert cmp.matches
    metric = {r["metric"]: r["verdict"] for r in cmp.metrics}
    assert metric["fast_1.0"] == NOISE and metric["fast_0"] == SAME
    far = frame(rec("t1", "s", Status.OK, 0.5, 0.45, 0.55), rec("t2", "s", Status.OK, 2.0, 1.9, 2.1))
    cmp = compare(a, far, TASKS, PS)
    assert {r["metric"]: r["verdict"] for r in cmp.metrics}["fast_1.0"] == DIFFERENT
    assert cmp.differences[0].startswith("m/t1/s: speedup 1.05x [0.9, 1.2] in the bundle, 0.5x [0.45, 0.55] in the "
                                         "reproduction (between-run sd 6.2 %, the default")
    # the task's A/A band is one run's own interval, no between-run figure: it does not absorb the difference ...
    assert not compare(a, far, TASKS, PS, noise={"t1": math.log(2.5)}).matches
    # ... a between-run sd that covers the ratio does
    wide = Between(lambda _t: Tau(0.4, "calibration.json", 5, "task"))
    assert compare(a, far, TASKS, PS, between=wide).matches


def test_other_hardware_compares_compile_and_correctness_only():
    a = frame(rec("t1", "s", Status.OK, 1.05, 1.0, 1.1), rec("t2", "s", Status.OK, 2.0, 1.9, 2.1))
    b = frame(rec("t1", "s", Status.OK, 0.3, 0.29, 0.31), rec("t2", "s", Status.OK, 2.0, 1.9, 2.1))
    cmp = compare(a, b, TASKS, PS, same_hardware=False)
    assert cmp.matches
    assert {r["speedup"] for r in cmp.candidates} == {SKIPPED}
    assert {r["metric"]: r["verdict"] for r in cmp.metrics}["fast_1.0"] == SKIPPED
    b = frame(rec("t1", "s", Status.TIMING_FAILED), rec("t2", "s", Status.COMPILE_ERROR))
    assert compare(a, b, TASKS, PS, same_hardware=False).differences[0].startswith("m/t2/s: compile outcome built")


def test_the_bundled_config_reads_back_exactly(tmp_path, monkeypatch):
    cfg = load_config(None, ["--run.dir", str(tmp_path / "r"), "--tasks.dir", str(tmp_path / "t"),
                             "--timing.rounds", "4", "--candidates.sources",
                             '[{"method": "a", "path": "/x"}]', "--dispatch.address", "auto"])
    data = cfg.model_dump(mode="json")
    monkeypatch.setenv("MKB_TIMING__ROUNDS", "7")  # a reviewer's environment changes no bundled digest
    assert exact_config(data).digest() == cfg.digest()
    path = tmp_path / "c.toml"
    path.write_text(config_toml(data))
    monkeypatch.delenv("MKB_TIMING__ROUNDS")
    again = load_config(path)
    assert again.model_dump(mode="json") == data and isinstance(again, EvalConfig)
    assert tomllib.loads(path.read_text())["candidates"]["sources"] == [{"method": "a", "path": "/x"}]
    with pytest.raises(Exception, match="timing.rounds"):
        exact_config({**data, "timing": {**data["timing"], "rounds": 1}})


def test_a_jsonl_source_keeps_the_lines_of_recorded_tasks_byte_for_byte(tmp_path, fixture_tasks_dir):
    from kit.bundle.pack import copy_source
    from kit.candidates import load_candidates
    from kit.settings.config import CandidateSource
    from kit.suite.tasks import load_suite

    exp = (fixture_tasks_dir.parent / "candidates/sample/fx_exp/correct/CPUUnary.cpp").read_text()
    lines = [json.dumps({"task_id": "fx_exp", "sample_id": "a", "files": {"CPUUnary.cpp": exp}}),
             '  {"task_id": "fx_exp", "sample_id": "b", "response": "no code here"}  ',
             json.dumps({"task_id": "fx_sub", "sample_id": "a", "files": {"CPUBinary.cpp": "int x;"}}), ""]
    src = tmp_path / "m.jsonl"
    src.write_text("\n".join(lines))
    records = frame(rec("fx_exp", "a", Status.OK), rec("fx_exp", "b", Status.REJECTED_INPUT))
    root = tmp_path / "root"
    entry = copy_source({"method": "m", "path": str(src)}, records, root, {})
    copied = root / entry.path
    assert copied.read_text().splitlines() == lines[:2]  # fx_sub has no record here: left out; spaces kept
    tasks = {t.id: t for t in load_suite(fixture_tasks_dir)}
    sha = {(c.task_id, c.sample_id): c.sha256 for c in load_candidates(CandidateSource(method="m", path=src), tasks,
                                                                         1 << 20)}
    again = {(c.task_id, c.sample_id): c.sha256 for c in load_candidates(CandidateSource(method="m", path=copied),
                                                                           tasks, 1 << 20)}
    assert again == {k: v for k, v in sha.items() if k[0] == "fx_exp"} and len(again) == 2


def test_between_run_sd_decides_the_layernorm_pair_and_keeps_a_20_percent_slower_kernel_different():
    """Issue 27: layernorm's correct sample 0.231x [0.21, 0.253] in the bundle, 0.19x [0.176, 0.205] reproduced on
    the same host later: within noise with the tau a calibration gives, different without one (tau = 0); a
    candidate made 25 % slower (speedup x 0.8) is different under the same tau (20 %: see test_betweenrun)."""
    bundle = frame(rec("t1", "s", Status.OK, 0.231, 0.21, 0.253))
    later = frame(rec("t1", "s", Status.OK, 0.19, 0.176, 0.205))
    slower = frame(rec("t1", "s", Status.OK, 0.231 * 0.8, 0.21 * 0.8, 0.253 * 0.8))
    calibrated = Tau(0.06, "calibration.json", 5, "pooled")
    cmp = compare(bundle, later, TASKS, PS, between=Between(lambda _t: calibrated))
    assert cmp.matches and cmp.candidates[0]["speedup"] == NOISE and cmp.candidates[0]["tau_log_sd"] == 0.06
    assert cmp.taus_used() == ["between-run sd 6.2 %, pooled estimate of 5 runs from calibration.json: 1 task(s)"]
    assert not compare(bundle, later, TASKS, PS, between=Between(lambda _t: Tau(0.0, "none", 2))).matches
    cmp = compare(bundle, slower, TASKS, PS, between=Between(lambda _t: calibrated))
    assert cmp.candidates[0]["speedup"] == DIFFERENT and "pooled estimate of 5 runs" in cmp.differences[0]
    # with intervals of +-9 % and tau 6 % only a change of 24 % or more is told apart: said by name
    assert cmp.candidates[0]["detectable_change"] == pytest.approx(0.236, abs=0.002)
    assert cmp.detectable() == ("a speedup changed by 20 % would be called different for 0 of 1 compared; not for "
                                "m/t1/s (needs 24 %)")


def test_the_verdict_says_for_which_speedups_a_20_percent_change_is_told_apart():
    tight = frame(rec("t1", "s", Status.OK, 1.5, 1.46, 1.54), rec("t2", "s", Status.OK, 1.0, 0.8, 1.25))
    cmp = compare(tight, tight, TASKS, PS, between=Between(lambda _t: Tau(0.01, "c", 5, "pooled")))
    assert cmp.matches and [r["detectable_change"] < 0.1 for r in cmp.candidates] == [True, False]
    assert cmp.detectable() == ("a speedup changed by 20 % would be called different for 1 of 2 compared; not for "
                                "m/t2/s (needs 56 %)")
    assert compare(frame(rec("t1", "s", Status.COMPILE_ERROR)), frame(rec("t1", "s", Status.COMPILE_ERROR)), TASKS,
                   PS).detectable() is None
    # many that cannot tell 20 %: the 5 that need most named, the rest counted
    wide = frame(*(rec("t1", f"s{i}", Status.OK, 1.0, 1 / (1.2 + i / 10), 1.2 + i / 10) for i in range(8)))
    text = compare(wide, wide, TASKS, PS).detectable()
    assert text.count("(needs") == 5 and text.startswith("a speedup changed by 20 % would be called different for 0 "
                                                           "of 8 compared; not for m/t1/s7 (needs") and text.endswith(
        " and 3 more")


# Issue 27, measured on the real tree (docs/scoring.md, the second VM): bundle B's speedups of ArgMax's and Det's
# correct samples, their five honest reproductions and five runs of each kernel made about 20 % slower; tau 4.7 %
# (the host's between-run sd from 6 separate runs, task estimate).
MEASURED = {
    "argmax": (Speedup(1.04, 1.01, 1.08),
               [Speedup(1.03, 1.01, 1.05), Speedup(0.988, 0.902, 1.08), Speedup(1.06, 1.03, 1.09),
                Speedup(0.996, 0.943, 1.05), Speedup(0.993, 0.884, 1.12)],
               [Speedup(0.829, 0.765, 0.899), Speedup(0.88, 0.798, 0.97), Speedup(0.848, 0.803, 0.896),
                Speedup(0.858, 0.828, 0.889), Speedup(0.861, 0.828, 0.894)]),
    "det": (Speedup(1.12, 1.01, 1.24),
            [Speedup(1.065, 1.052, 1.079), Speedup(1.075, 1.032, 1.119), Speedup(1.064, 1.048, 1.079),
             Speedup(1.068, 1.012, 1.126), Speedup(1.109, 1.038, 1.185)],
            [Speedup(0.895, 0.87, 0.92), Speedup(0.894, 0.879, 0.91), Speedup(0.901, 0.884, 0.919),
             Speedup(0.913, 0.838, 0.995), Speedup(0.893, 0.859, 0.928)]),
}


@pytest.mark.parametrize("kernel", sorted(MEASURED))
def test_measured_honest_reproductions_pass_and_the_kernel_made_slower_is_different(kernel):
    bundle, honest, slower = MEASURED[kernel]
    tau = math.log(1.047)
    assert all(speedup_verdict(bundle, b, tau) in (SAME, NOISE) for b in honest)
    assert [speedup_verdict(bundle, b, tau) for b in slower] == [DIFFERENT] * 5
    # without the host's figure (tau 0) the honest ones pass too: their intervals overlap the bundle's
    assert all(speedup_verdict(bundle, b, 0.0) in (SAME, NOISE) for b in honest)
