"""kit.score.metrics against numbers computed by hand from a small table of records."""

from __future__ import annotations

import io
import math
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest

from kit.results import rules as scoring
from kit.results.records import ErrorKind, Flag, Record, Status
from kit.results.shards import records_frame
from kit.score import headline, metrics

S = Status


def rec(method, task, sample, status, speedup=None, ci_low=None, emulated=False, kind=ErrorKind.NONE):
    return Record(
        job_id=f"{method}/{task}/{sample}",
        method=method,
        task_id=task,
        sample_id=str(sample),
        candidate_sha256="0" * 64,
        config_digest="cfg",
        status=status,
        error_kind=kind,
        speedup=speedup,
        speedup_ci_low=ci_low,
        speedup_ci_high=None if speedup is None else speedup * 1.1,
        timing_emulated=emulated,
    )


TASKS = pl.DataFrame(
    {
        "task_id": ["t1", "t2", "t3", "t4", "t5", "t6"],
        "category": ["unary", "unary", "binary", "binary", "activation", "activation"],
        "split": ["test"] * 6,
    }
)

RECORDS = records_frame(
    [
        # t1: three samples: a compile error, a mismatch, a correct one 1.3x faster
        rec("A", "t1", 0, S.COMPILE_ERROR, kind=ErrorKind.COMPILER),
        rec("A", "t1", 1, S.VERIFY_MISMATCH, kind=ErrorKind.VALUE),
        rec("A", "t1", 2, S.OK, speedup=1.3, ci_low=1.1),
        # t2: two correct samples; best speedup 2.5, best CI low 0.9
        rec("A", "t2", 0, S.OK, speedup=0.6, ci_low=0.4),
        rec("A", "t2", 1, S.OK, speedup=2.5, ci_low=0.9),
        # t3: built, crashed at run time: compiled, not correct
        rec("A", "t3", 0, S.RUNTIME_CRASH, kind=ErrorKind.SIGNAL),
        # t4: no record for A (missing task)
        # t5: correct but the native baseline cannot run
        rec("A", "t5", 0, S.OK, kind=ErrorKind.NO_NATIVE),
        # t6: correct, but timed under qemu: 3.0x is not scored
        rec("A", "t6", 0, S.OK, speedup=3.0, ci_low=2.8, emulated=True),
        # a train task that is not in the table: ignored
        rec("A", "t_train", 0, S.OK, speedup=5.0, ci_low=4.0),
        # method B: one correct sample on t3, exactly as fast as native
        rec("B", "t3", 0, S.OK, speedup=1.0, ci_low=0.8),
    ]
)


@pytest.fixture(scope="module")
def by_method():
    df = metrics.summary(RECORDS, TASKS)
    return {r["method"]: r for r in df.iter_rows(named=True)}


def test_method_a_by_hand(by_method):
    a = by_method["A"]
    assert a["n_tasks"] == 6 and a["n_missing"] == 1  # t4
    # compiled: t1 (mismatch/ok built), t2, t3 (crash is after the build), t5, t6 -> 5 of 6
    assert a["csr"] == pytest.approx(5 / 6)
    # correct: t1, t2, t5, t6 -> 4 of 6
    assert a["fcr"] == pytest.approx(4 / 6)
    # scorable speedups: t1 1.3, t2 2.5 (t5 no native, t6 emulated)
    assert a["n_with_speedup"] == 2 and a["n_no_native"] == 1 and a["n_emulated"] == 1
    assert a["fast_0"] == pytest.approx(2 / 6)
    assert a["fast_0.5"] == pytest.approx(2 / 6)
    assert a["fast_1.0"] == pytest.approx(2 / 6)
    assert a["fast_1.5"] == pytest.approx(1 / 6)  # only 2.5
    assert a["fast_2.0"] == pytest.approx(1 / 6)
    # significant: best CI lows t1 1.1, t2 0.9
    assert a["fast_sig_0"] == pytest.approx(2 / 6)
    assert a["fast_sig_0.5"] == pytest.approx(2 / 6)
    assert a["fast_sig_1.0"] == pytest.approx(1 / 6)
    assert a["fast_sig_1.5"] == 0.0
    # geomean over t1, t2: sqrt(1.3 * 2.5) = sqrt(3.25)
    assert a["geomean_speedup"] == pytest.approx(math.sqrt(3.25))
    # pass@1 over every task: t1 c/n = 1/3, t2 2/2, t3 0/1, t4 (no record) 0, t5 1/1, t6 1/1 -> (1/3 + 3) / 6;
    # 5 tasks have >= 1 sample
    assert a["pass@1"] == pytest.approx(5 / 9) and a["pass@1_tasks"] == 5
    assert a["no_native_tasks"] == ["t5"]


def test_method_b_by_hand(by_method):
    b = by_method["B"]
    # B has one record (t3): the other five tasks are failures
    assert b["n_missing"] == 5
    assert b["csr"] == pytest.approx(1 / 6) and b["fcr"] == pytest.approx(1 / 6)
    assert b["fast_0"] == pytest.approx(1 / 6)  # 1.0 > 0
    assert b["fast_1.0"] == 0.0  # 1.0 is not > 1.0
    assert b["geomean_speedup"] == pytest.approx(1.0)
    # the native baseline of t5 is missing for every method of the run
    assert b["no_native_tasks"] == ["t5"]


def test_pass_at_k_more_samples():
    df = metrics.summary(RECORDS, TASKS, ks=(1, 2, 3))
    a = df.filter(pl.col("method") == "A").row(0, named=True)
    # pass@2 over every task, missing samples failed: t1 1 - C(2,2)/C(3,2) = 2/3, t2 (c = n) 1; n = 1 < 2:
    # t3 (wrong) 0, t5 and t6 (correct) 1; t4 (no record) 0 -> (2/3 + 3) / 6 = 11/18; 2 tasks have n >= 2
    assert a["pass@2"] == pytest.approx(11 / 18) and a["pass@2_tasks"] == 2
    # pass@3: t1 (n=3, c=1): 1 - C(2,3)/C(3,3) = 1; t2, t5, t6 have a correct sample: 1; t3, t4: 0 -> 4/6
    assert a["pass@3"] == pytest.approx(4 / 6) and a["pass@3_tasks"] == 1
    b = df.filter(pl.col("method") == "B").row(0, named=True)
    # B: t3 (its one sample correct) 1, the five tasks without records 0
    assert b["pass@2"] == pytest.approx(1 / 6) and b["pass@2_tasks"] == 0


@pytest.mark.parametrize("n", [1, 2, 5, 10, 30])
def test_pass_at_k_equals_combinatorics(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            direct = 1 - math.comb(n - c, k) / math.comb(n, k)
            assert metrics.pass_at_k(n, c, k) == pytest.approx(direct, abs=1e-12)


def test_pass_at_k_stable_for_large_n():
    # C(1000, 100) overflows a float; the product form does not
    n, c, k = 1000, 7, 100
    direct = 1 - math.comb(n - c, k) / math.comb(n, k)  # exact integers, then one division
    assert metrics.pass_at_k(n, c, k) == pytest.approx(direct, rel=1e-9)
    with pytest.raises(ValueError):
        metrics.pass_at_k(2, 1, 3)


def test_per_category(by_method):
    df = metrics.summary(RECORDS, TASKS, by=("method", "category"))
    rows = {(r["method"], r["category"]): r for r in df.iter_rows(named=True)}
    assert len(rows) == 2 * 3
    u = rows[("A", "unary")]
    # t1, t2 both compiled and correct; speedups 1.3, 2.5
    assert (u["csr"], u["fcr"], u["fast_1.0"], u["fast_1.5"]) == (1.0, 1.0, 1.0, 0.5)
    assert u["csr_ci_low"] == u["csr_ci_high"] == 1.0  # every resample of all-ones is one
    b = rows[("A", "binary")]
    assert (b["csr"], b["fcr"], b["n_missing"]) == (0.5, 0.0, 1)  # t3 crash, t4 missing
    act = rows[("A", "activation")]
    # t5 (no native) and t6 (emulated): correct but never fast
    assert (act["csr"], act["fcr"], act["fast_0"], act["geomean_speedup"]) == (1.0, 1.0, 0.0, None)
    # per-category counts add up to the method's totals
    assert (
        sum(rows[("A", c)]["n_correct"] for c in ("unary", "binary", "activation"))
        == by_method["A"]["n_correct"]
    )


def test_per_split_uses_task_table():
    tasks = pl.concat(
        [TASKS, pl.DataFrame({"task_id": ["t_train"], "category": ["unary"], "split": ["train"]})]
    )
    df = metrics.summary(RECORDS, tasks, by=("method", "split"))
    train = df.filter((pl.col("method") == "A") & (pl.col("split") == "train")).row(0, named=True)
    assert (train["n_tasks"], train["fast_2.0"]) == (1, 1.0) and train["geomean_speedup"] == pytest.approx(
        5.0
    )
    test = df.filter((pl.col("method") == "A") & (pl.col("split") == "test")).row(0, named=True)
    assert test["n_tasks"] == 6 and test["csr"] == pytest.approx(5 / 6)


def test_bootstrap_ci_seeded_and_bracketing():
    a1 = metrics.summary(RECORDS, TASKS, boot=metrics.Bootstrap(500, 7)).filter(pl.col("method") == "A")
    a2 = metrics.summary(RECORDS, TASKS, boot=metrics.Bootstrap(500, 7)).filter(pl.col("method") == "A")
    assert a1.equals(a2)
    r = a1.row(0, named=True)
    for c in ("csr", "fcr", "fast_0", "fast_1.0", "fast_2.0"):
        assert r[f"{c}_ci_low"] <= r[c] <= r[f"{c}_ci_high"]
    # the same resampling by hand: CSR indicators of t1..t6 are 1,1,1,0,1,1
    ind = np.array([1, 1, 1, 0, 1, 1], dtype=float)
    idx = np.random.default_rng(7).integers(0, 6, size=(500, 6))
    means = ind[idx].mean(axis=1)
    assert r["csr_ci_low"] == pytest.approx(np.percentile(means, 2.5))
    assert r["csr_ci_high"] == pytest.approx(np.percentile(means, 97.5))
    assert r["csr_ci_low"] < r["csr_ci_high"]


def test_custom_ps_and_lazyframe_input():
    df = metrics.summary(RECORDS.lazy(), TASKS, ps=[1.2, 3])
    a = df.filter(pl.col("method") == "A").row(0, named=True)
    assert a["fast_1.2"] == pytest.approx(2 / 6)  # 1.3 and 2.5
    assert a["fast_3.0"] == 0.0  # the emulated 3.0 never counts
    assert "fast_1.0" not in df.columns


def test_headline_line(by_method):
    assert headline.format_headline(by_method["A"]) == (
        "CSR 83.3% FCR 66.7% fast_0 33.3% fast_0.5 33.3% fast_1.0 33.3% fast_1.5 16.7% fast_2.0 16.7%"
    )
    buf = io.StringIO()
    headline.print_headline(metrics.summary(RECORDS, TASKS), file=buf)
    lines = buf.getvalue().splitlines()
    assert (
        lines[0].startswith("A: CSR 83.3% FCR 66.7%")
        and "(6 tasks, 1 timed under emulation: not scored; geomean 1.80x over the 2 with a speedup)" in lines[0]
    )
    assert lines[1].startswith("B: CSR 16.7%")
    # the end-of-eval text from records and a list of Task-like objects
    task_objs = [
        SimpleNamespace(id=r["task_id"], category=r["category"], split=r["split"])
        for r in TASKS.iter_rows(named=True)
    ]
    assert headline.headline(RECORDS, task_objs, [1.0]).splitlines() == [
        "A: CSR 83.3% FCR 66.7% fast_1.0 33.3% (6 tasks, 1 timed under emulation: not scored; geomean 1.80x over the 2 "
        "with a speedup)",
        "B: CSR 16.7% FCR 16.7% fast_1.0 0.0% (6 tasks geomean 1.00x over the 1 with a speedup)",
    ]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 0.0, -2.0])
def test_a_speedup_that_is_not_a_positive_finite_ratio_is_not_scored(bad):
    """NaN > p is true in Polars: a NaN speedup (a hand-made table; timing never writes one) would count for
    every fast_p and make the geomean NaN."""
    recs = records_frame([rec("A", "t1", 0, S.OK, speedup=1.0, ci_low=1.0), rec("A", "t2", 0, S.OK, speedup=2.0, ci_low=1.5)])
    first = pl.int_range(pl.len()) == 0
    recs = recs.with_columns(pl.when(first).then(bad).otherwise(pl.col(c)).alias(c) for c in ("speedup", "speedup_ci_low"))
    row = metrics.summary(recs, TASKS, ps=[0.0, 1.0], boot=metrics.Bootstrap(n=10)).row(0, named=True)
    assert row["n_correct"] == 2 and row["n_with_speedup"] == 1
    assert row["fast_0"] == pytest.approx(1 / 6) and row["fast_sig_1.0"] == pytest.approx(1 / 6)
    assert row["geomean_speedup"] == pytest.approx(2.0)


def test_errors_name_the_problem():
    with pytest.raises(metrics.MetricsError, match="'speedup'"):
        metrics.summary(RECORDS.drop("speedup"), TASKS)
    with pytest.raises(metrics.MetricsError, match="duplicate sample"):
        metrics.summary(pl.concat([RECORDS, RECORDS.head(1)]), TASKS)
    with pytest.raises(metrics.MetricsError, match="duplicate task_id"):
        metrics.summary(RECORDS, pl.concat([TASKS, TASKS.head(1)]))
    with pytest.raises(metrics.MetricsError, match="bogus"):
        metrics.summary(RECORDS.with_columns(status=pl.lit("bogus")), TASKS)
    with pytest.raises(metrics.MetricsError, match="system"):
        metrics.summary(RECORDS, TASKS, by=("category",))


def test_no_records_gives_no_rows():
    assert metrics.summary(RECORDS.head(0), TASKS).height == 0


# -- the scoring rules of records that may not count (kit.results.rules) ------------------------------------------
def flagged(method, task, sample, speedup, codes=("implausible_speedup",), untimeable=False):
    """An ``ok`` record with ``speedup`` (CI low 0.9 of it), the flags ``codes`` and ``timing_untimeable``."""
    r = rec(method, task, sample, S.OK, speedup=speedup, ci_low=speedup * 0.9)
    flags = [Flag(code=c, reason=f"{c}: {speedup}x") for c in codes]
    return r.model_copy(update={"flags": flags, "timing_untimeable": untimeable})


def test_harness_errors_are_failed_samples_counted_and_a_task_with_only_them_is_missing():
    recs = records_frame([
        rec("H", "t1", 0, S.HARNESS_ERROR, kind=ErrorKind.INTERNAL),  # t1: only harness errors
        rec("H", "t1", 1, S.HARNESS_ERROR, kind=ErrorKind.INTERNAL),
        rec("H", "t2", 0, S.HARNESS_ERROR, kind=ErrorKind.INTERNAL),  # t2: one, and a correct sample
        rec("H", "t2", 1, S.OK, speedup=1.5, ci_low=1.2),
        rec("H", "t3", 0, S.WORKER_LOST, kind=ErrorKind.INTERNAL),  # not a harness error: the candidate's
    ])
    h = metrics.summary(recs, TASKS, ks=(1, 2), boot=metrics.Bootstrap(n=10)).row(0, named=True)
    assert h["n_harness_errors"] == 3
    assert h["harness_error_tasks"] == ["t1"]
    # missing: t4, t5, t6 without records and t1 with only harness errors; t3 has its worker_lost record
    assert h["n_missing"] == 4
    assert h["csr"] == h["fcr"] == h["fast_1.0"] == pytest.approx(1 / 6)  # t2 only
    # pass@2: t2 (n=2, c=1) 1 - C(1,2)/C(2,2) = 1; t1 (n=2, c=0) 0: the harness errors are failed samples
    assert h["pass@2"] == pytest.approx(1 / 6) and h["pass@2_tasks"] == 2
    assert h["pass@1"] == pytest.approx(0.5 / 6)  # t2: 1 of its 2 samples
    line = headline.headline(recs, TASKS, [1.0])
    assert line == ("H: CSR 16.7% FCR 16.7% fast_1.0 16.7% (6 tasks, 3 harness errors: rerun to retry; "
                    "geomean 1.50x over the 1 with a speedup)")
    one = headline.headline(recs.filter(pl.col("sample_id") == "1"), TASKS, [1.0])
    assert "(6 tasks, 1 harness error: rerun to retry; geomean" in one
    lost = headline.headline(recs.filter(pl.col("task_id") == "t1"), TASKS, [1.0])
    assert lost.endswith("(6 tasks, 2 harness errors: rerun to retry)")


def test_timing_failed_is_correct_but_never_fast_whatever_its_fields():
    recs = records_frame([
        rec("A", "t1", 0, S.TIMING_FAILED, speedup=3.0, ci_low=2.8, kind=ErrorKind.WORKER_LOST),
        rec("A", "t2", 0, S.OK, speedup=2.0, ci_low=1.8),
    ])
    a = metrics.summary(recs, TASKS, boot=metrics.Bootstrap(n=10)).row(0, named=True)
    assert a["csr"] == a["fcr"] == pytest.approx(2 / 6)
    assert a["n_with_speedup"] == 1
    for p in ("0", "0.5", "1.0", "1.5"):
        assert a[f"fast_{p}"] == a[f"fast_sig_{p}"] == pytest.approx(1 / 6), p  # t2 only
    assert a["fast_2.0"] == 0.0  # 2.0 is not > 2.0; the timing_failed 3.0 does not count
    assert a["geomean_speedup"] == pytest.approx(2.0)
    pt = metrics.per_task(recs, TASKS)
    assert pt.filter(pl.col("task_id") == "t1")["speedup"].to_list() == [None]


def test_a_crash_of_the_candidates_timing_runs_is_not_correct_one_of_the_native_side_is():
    """The timing stage's verdict on a failed run (kit.stages.timingrun.check_run) and what it counts for: a kernel that
    traps once verified scored timing_failed (correct, FCR); the candidate's crash is runtime_crash now (CSR
    only), its hang runtime_timeout, while the native side's crash stays timing_failed (the machine's)."""
    from kit.host.proc import ProcResult
    from kit.mnn.runner import RunResult
    from kit.results.outcomes import StageFailure
    from kit.stages import timingrun as strun

    def verdict(who, **how):
        res = ProcResult(("mkb_runner",), how.pop("returncode", -4), "", "trap", 0.2, **how)
        with pytest.raises(StageFailure) as info:
            strun.check_run(RunResult(False, {}, [], [], {}, "", res), who, 0)
        return info.value

    crash, native = verdict("candidate", signal=4), verdict("native", signal=4)
    assert (crash.status, crash.kind, crash.signal) == (S.RUNTIME_CRASH, ErrorKind.SIGNAL, 4)
    assert (native.status, native.kind) == (S.TIMING_FAILED, ErrorKind.SIGNAL)
    assert verdict("candidate", returncode=-9, timed_out=True).status == S.RUNTIME_TIMEOUT
    assert verdict("candidate", returncode=3).status == S.RUNTIME_CRASH
    recs = records_frame([rec("A", "t1", 0, crash.status, kind=crash.kind),
                          rec("A", "t2", 0, native.status, kind=native.kind)])
    a = metrics.summary(recs, TASKS, boot=metrics.Bootstrap(n=10)).row(0, named=True)
    assert a["csr"] == pytest.approx(2 / 6)
    assert a["fcr"] == pytest.approx(1 / 6)  # t2 only: the candidate's own crash is not correct


def test_a_method_whose_records_all_fall_outside_the_tasks_still_appears_with_zeros():
    recs = pl.concat([RECORDS, records_frame([rec("C", "t_train", 0, S.OK, speedup=5.0, ci_low=4.0)])])
    df = metrics.summary(recs, TASKS, boot=metrics.Bootstrap(n=10))
    c = df.filter(pl.col("method") == "C").row(0, named=True)
    assert (c["n_tasks"], c["n_missing"], c["csr"], c["fcr"], c["fast_0"]) == (6, 6, 0.0, 0.0, 0.0)
    assert c["geomean_speedup"] is None and c["pass@1"] == 0.0
    assert df["method"].to_list() == ["A", "B", "C"]
    assert headline.headline(recs, TASKS, [1.0]).splitlines()[2] == "C: CSR 0.0% FCR 0.0% fast_1.0 0.0% (6 tasks)"
    assert metrics.per_task(recs, TASKS).filter(pl.col("method") == "C").height == 6


def test_untimeable_and_implausible_speedups_are_not_scored():
    recs = records_frame([
        flagged("A", "t1", 0, 2.0, codes=(), untimeable=True),  # untimeable: no speedup
        flagged("A", "t2", 0, 50.0),  # implausible: no speedup
        flagged("A", "t3", 0, 40.0),  # implausible, but another sample of t3 has a usable speedup
        rec("A", "t3", 1, S.OK, speedup=1.2, ci_low=1.1),
        flagged("A", "t4", 0, 1.4, codes=("other_code",)),  # a flag of another code: scored
    ])
    a = metrics.summary(recs, TASKS, boot=metrics.Bootstrap(n=10)).row(0, named=True)
    assert a["fcr"] == pytest.approx(4 / 6)
    assert (a["n_with_speedup"], a["n_untimeable"], a["n_implausible"]) == (2, 1, 1)  # t3, t4; t1; t2
    assert a["untimeable_tasks"] == ["t1"]
    assert a["fast_0"] == a["fast_sig_0"] == pytest.approx(2 / 6)  # p = 0 too: t1 and t2 never count
    assert a["fast_2.0"] == 0.0
    assert a["geomean_speedup"] == pytest.approx(math.sqrt(1.2 * 1.4))
    best = dict(metrics.per_task(recs, TASKS).select("task_id", "speedup").iter_rows())
    assert best == {"t1": None, "t2": None, "t3": 1.2, "t4": 1.4, "t5": None, "t6": None}


def test_records_without_the_new_fields_read_them_as_not_set():
    """Frames of older records: null flags and timing_untimeable, or no such columns at all."""
    recs = records_frame([rec("A", "t1", 0, S.OK, speedup=1.3, ci_low=1.1)])
    for old in (recs.with_columns(pl.lit(None, dtype=recs.schema[c]).alias(c) for c in ("flags", "timing_untimeable")),
                recs.drop("flags", "timing_untimeable")):
        a = metrics.summary(old, TASKS, boot=metrics.Bootstrap(n=10)).row(0, named=True)
        assert a["fast_1.0"] == pytest.approx(1 / 6) and (a["n_untimeable"], a["n_implausible"]) == (0, 0)


def test_fast_sig_beyond_the_noise_band_of_each_task():
    recs = records_frame([
        rec("A", "t1", 0, S.OK, speedup=1.15, ci_low=1.05),  # inside t1's band of 1.2x
        rec("A", "t2", 0, S.OK, speedup=1.5, ci_low=1.1),  # beyond it
        rec("A", "t3", 0, S.OK, speedup=0.7, ci_low=0.6),  # 1/0.7 = 1.43 > 1.2: outside, slower
        rec("A", "t4", 0, S.OK, speedup=1.1, ci_low=1.01),  # no noise figure: the CI rule alone
    ])
    noise = {"t1": math.log(1.2), "t2": math.log(1.2), "t3": math.log(1.2), "t5": None}
    plain = metrics.summary(recs, TASKS, ps=[0.0, 1.0], boot=metrics.Bootstrap(n=10)).row(0, named=True)
    sig = metrics.summary(recs, TASKS, ps=[0.0, 1.0], boot=metrics.Bootstrap(n=10), noise=noise).row(0, named=True)
    assert plain["fast_sig_1.0"] == pytest.approx(3 / 6)  # t1, t2, t4: CI low above 1
    assert sig["fast_sig_1.0"] == pytest.approx(2 / 6)  # t1's 1.15 is not beyond 1.0 * 1.2
    assert sig["fast_sig_0"] == plain["fast_sig_0"] == pytest.approx(4 / 6)  # p = 0: 0 * 1.2 = 0
    assert sig["fast_1.0"] == plain["fast_1.0"] == pytest.approx(3 / 6)  # fast_p itself is unchanged
    pt = metrics.per_task(recs, TASKS, noise=noise).select("task_id", "noise_log", "inside_noise")
    inside = dict(pt.select("task_id", "inside_noise").iter_rows())
    assert inside == {"t1": True, "t2": False, "t3": False, "t4": None, "t5": None, "t6": None}
    with pytest.raises(metrics.MetricsError, match="'t1'.*noise_log"):
        metrics.summary(recs, TASKS, noise={"t1": -0.1})


def test_task_pass_at_k_counts_missing_samples_as_failed():
    assert scoring.task_pass_at_k(0, 0, 3) == 0.0  # no record
    assert scoring.task_pass_at_k(2, 1, 3) == 1.0 and scoring.task_pass_at_k(2, 0, 3) == 0.0  # n < k
    assert scoring.task_pass_at_k(4, 1, 2) == pytest.approx(1 - math.comb(3, 2) / math.comb(4, 2))


def test_candidate_and_best_speedups_read_only_scorable_records_with_their_bounds():
    """The speedups that runs are compared by (reproduce, the report of several runs): only scorable ones (an
    emulated 3.0x, a no-native task, a mismatch are left out), a missing or non-positive bound standing at the
    value, and per (method, task) the largest of its samples."""
    frame = records_frame([
        rec("A", "t1", 0, S.OK, speedup=1.3, ci_low=1.1),
        rec("A", "t1", 1, S.OK, speedup=1.8, ci_low=0.0),
        rec("A", "t1", 2, S.VERIFY_MISMATCH, kind=ErrorKind.VALUE),
        rec("A", "t2", 0, S.OK, speedup=0.7, ci_low=None),
        rec("A", "t5", 0, S.OK, kind=ErrorKind.NO_NATIVE),
        rec("A", "t5", 1, S.OK, speedup=2.0, ci_low=1.9),
        rec("A", "t6", 0, S.OK, speedup=3.0, ci_low=2.9, emulated=True),
    ])
    per = scoring.candidate_speedups(frame)
    assert set(per) == {("A", "t1", "0"), ("A", "t1", "1"), ("A", "t2", "0")}
    assert per[("A", "t1", "0")] == pytest.approx((1.3, 1.1, 1.43))
    assert per[("A", "t1", "1")] == pytest.approx((1.8, 1.8, 1.98))  # a 0 bound: the value
    assert per[("A", "t2", "0")] == pytest.approx((0.7, 0.7, 0.77))
    best = scoring.best_speedups(frame)
    assert best == {("A", "t1"): per[("A", "t1", "1")], ("A", "t2"): per[("A", "t2", "0")]}
    assert best[("A", "t1")].text() == "1.8x [1.8, 1.98]"
