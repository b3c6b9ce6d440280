"""kit.metrics against numbers computed by hand from a small table of records."""

from __future__ import annotations

import io
import math
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest

from kit import headline, metrics
from kit.records import ErrorKind, Record, Status
from kit.shards import records_frame

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
    # pass@1 over tasks with >= 1 sample: t1 c/n = 1/3, t2 2/2, t3 0/1, t5 1/1, t6 1/1 -> (1/3 + 3) / 5 = 2/3
    assert a["pass@1"] == pytest.approx(2 / 3) and a["pass@1_tasks"] == 5
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
    # pass@2 over tasks with n >= 2: t1 1 - C(2,2)/C(3,2) = 2/3, t2 (c = n) 1 -> 5/6
    assert a["pass@2"] == pytest.approx(5 / 6) and a["pass@2_tasks"] == 2
    # pass@3: only t1 (n=3, c=1): 1 - C(2,3)/C(3,3) = 1 - 0/1 = 1
    assert a["pass@3"] == pytest.approx(1.0) and a["pass@3_tasks"] == 1
    b = df.filter(pl.col("method") == "B").row(0, named=True)
    assert b["pass@2"] is None and b["pass@2_tasks"] == 0


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
    a1 = metrics.summary(RECORDS, TASKS, n_boot=500, seed=7).filter(pl.col("method") == "A")
    a2 = metrics.summary(RECORDS, TASKS, n_boot=500, seed=7).filter(pl.col("method") == "A")
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
        and "(6 tasks geomean 1.80x over the 2 with a speedup)" in lines[0]
    )
    assert lines[1].startswith("B: CSR 16.7%")
    # the end-of-eval text from records and a list of Task-like objects
    task_objs = [
        SimpleNamespace(id=r["task_id"], category=r["category"], split=r["split"])
        for r in TASKS.iter_rows(named=True)
    ]
    assert headline.headline(RECORDS, task_objs, [1.0]).splitlines() == [
        "A: CSR 83.3% FCR 66.7% fast_1.0 33.3% (6 tasks geomean 1.80x over the 2 with a speedup)",
        "B: CSR 16.7% FCR 16.7% fast_1.0 0.0% (6 tasks geomean 1.00x over the 1 with a speedup)",
    ]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 0.0, -2.0])
def test_a_speedup_that_is_not_a_positive_finite_ratio_is_not_scored(bad):
    """NaN > p is true in Polars: a NaN speedup (a hand-made table; timing never writes one) would count for
    every fast_p and make the geomean NaN."""
    recs = records_frame([rec("A", "t1", 0, S.OK, speedup=1.0, ci_low=1.0), rec("A", "t2", 0, S.OK, speedup=2.0, ci_low=1.5)])
    first = pl.int_range(pl.len()) == 0
    recs = recs.with_columns(pl.when(first).then(bad).otherwise(pl.col(c)).alias(c) for c in ("speedup", "speedup_ci_low"))
    row = metrics.summary(recs, TASKS, ps=[0.0, 1.0], n_boot=10).row(0, named=True)
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
