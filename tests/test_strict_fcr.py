"""Strict FCR and the native-incorrect rule (kit.score.metrics) on a small table of records, by hand.

t1: one sample, correct on the distribution, failed its ``ties`` set (native passed it): FCR yes, strict no.
t2: two samples: a fast one that failed ``negative_indices``, a slower one that passed everything: strict FCR
    yes, fast_strict from the slower one's speedup only.
t3: correct; its ``special_values`` set failed on the candidate AND on native: not held against it.
t4: correct, 2.0x, no edge sets, but the task is native_incorrect: FCR counts it, fast_p does not (unless
    score_native_incorrect).
t5: an old record without edge_sets (null column): strict = plain.
"""

from __future__ import annotations

import polars as pl
import pytest

from kit.results.records import EdgeSet, Record, Status
from kit.results.shards import records_frame
from kit.score import metrics

TASKS = pl.DataFrame({"task_id": ["t1", "t2", "t3", "t4", "t5"], "category": ["reduction"] * 5,
                      "split": ["test"] * 5})


def rec(task: str, sample: int, speedup: float, edges: list[EdgeSet]) -> Record:
    return Record(job_id=f"A/{task}/{sample}", method="A", task_id=task, sample_id=str(sample),
                  candidate_sha256="0" * 64, config_digest="cfg", status=Status.OK, speedup=speedup,
                  speedup_ci_low=speedup * 0.9, speedup_ci_high=speedup * 1.1, edge_sets=edges)


def frame() -> pl.DataFrame:
    records = records_frame([
        rec("t1", 0, 1.6, [EdgeSet(name="ties", ok=False, native_ok=True, reason="y: 3 of 64 differ")]),
        rec("t2", 0, 3.0, [EdgeSet(name="negative_indices", ok=False, native_ok=True)]),
        rec("t2", 1, 1.2, [EdgeSet(name="negative_indices", ok=True, native_ok=True)]),
        rec("t3", 0, 1.1, [EdgeSet(name="special_values", ok=False, native_ok=False)]),
        rec("t4", 0, 2.0, []),
        rec("t5", 0, 0.8, []),
    ])
    # t5 written by a kit before edge sets existed
    return records.with_columns(pl.when(pl.col("task_id") == "t5").then(None).otherwise(pl.col("edge_sets"))
                                .alias("edge_sets"))


def test_strict_fcr_counts_only_samples_that_pass_every_held_edge_set():
    tasks = metrics.with_native_rule(TASKS, metrics.NativeRule({"t4": "wrong"}))
    row = metrics.summary(frame(), tasks, ps=(1.0,)).row(0, named=True)
    assert (row["n_correct"], row["n_correct_strict"]) == (5, 4)
    assert row["fcr"] == pytest.approx(5 / 5) and row["fcr_strict"] == pytest.approx(4 / 5)
    # fast_1.0: t1 (1.6), t2 (3.0), t3 (1.1); t4 excluded (native incorrect); t5 0.8
    assert row["fast_1.0"] == pytest.approx(3 / 5)
    # strict: t2 by its 1.2x sample (the 3.0x one failed an edge set), t3 (native fails its set too)
    assert row["fast_strict_1.0"] == pytest.approx(2 / 5)
    assert row["native_incorrect_tasks"] == ["t4"] and row["n_native_incorrect"] == 1


def test_the_failed_edge_class_is_named_per_task():
    pt = metrics.per_task(frame(), TASKS).sort("task_id")
    assert pt["failed_edges"].to_list() == [["ties"], ["negative_indices"], [], [], []]
    assert pt["correct_strict"].to_list() == [False, True, True, True, True]
    assert pt["speedup_strict"].to_list()[:2] == [None, pytest.approx(1.2)]


def test_native_incorrect_tasks_are_scored_when_configured():
    def rule(scored: bool):
        return metrics.with_native_rule(TASKS, metrics.NativeRule({"t4": "wrong"}, scored=scored))

    excluded = metrics.summary(frame(), rule(False), ps=(1.5,)).row(0, named=True)
    scored = metrics.summary(frame(), rule(True), ps=(1.5,)).row(0, named=True)
    assert excluded["fast_1.5"] == pytest.approx(2 / 5) and scored["fast_1.5"] == pytest.approx(3 / 5)
    assert excluded["geomean_speedup"] < scored["geomean_speedup"]
    assert excluded["native_incorrect_tasks"] == ["t4"] and scored["native_incorrect_tasks"] == []


def test_the_report_lists_native_incorrect_tasks_and_failed_edge_sets(tmp_path):
    from kit.report import build_report
    from kit.results.shards import ShardWriter

    run = tmp_path / "run"
    recs = frame().to_dicts()
    with ShardWriter(run, "w0", flush_every=10) as w:
        for r in recs:
            w.append(Record(**{k: v for k, v in r.items() if v is not None}))
    paths = build_report([run], tmp_path / "rep", TASKS, n_boot=10,
                         native=metrics.NativeRule({"t4": "y: 12 of 64 differ (max abs 1.2)"}))
    md = paths.markdown.read_text()
    assert "## Tasks whose native MNN is incorrect" in md and "12 of 64 differ" in md
    assert "never for fast_p" in md
    edges = md.split("## Edge sets failed", 1)[1].split("##", 1)[0]
    assert "| A | t1 | ties | False |" in edges and "| A | t2 | negative_indices | True |" in edges
    assert "FCR strict %" in md
