"""CSR, FCR and fast_1.0 by refinement turn (``mkb refine``): for turn T, each task's best-of-k over the answers of
turns 1..T of every chain, as the paper scores iterative methods; one row per run, refined method and turn.

A method is refined when its sample ids are ``c<chain>.t<turn>`` (:func:`kit.outline.refine.sample_id`)."""

from __future__ import annotations

import polars as pl

from kit.report.data import Run
from kit.score import metrics

#: the sample id of a refinement chain's answer: chain, turn
TURN_ID = r"^c\d+\.t(\d+)$"


def turn_table(runs: list[Run]) -> pl.DataFrame:
    """``run``, ``method``, ``turn`` (u32), ``samples`` (records up to that turn), ``csr``, ``fcr``, ``fast_1.0``
    (% of the run's tasks); empty when no run has a refined method."""
    rows = []
    for r in runs:
        recs = r.records.with_columns(pl.col("sample_id").str.extract(TURN_ID, 1).cast(pl.UInt32).alias("_turn"))
        refined = recs.filter(pl.col("_turn").is_not_null())
        for method in sorted(refined["method"].unique().to_list()):
            mine = refined.filter(pl.col("method") == method)
            for turn in range(1, int(mine["_turn"].max()) + 1):
                upto = mine.filter(pl.col("_turn") <= turn).drop("_turn")
                s = metrics.summary(upto, r.tasks, ps=(1.0,), by=("method",), ks=(1,),
                                    boot=metrics.Bootstrap(n=200)).row(0, named=True)
                rows.append({"run": r.label, "method": method, "turn": turn, "samples": upto.height,
                             "csr": 100 * s["csr"], "fcr": 100 * s["fcr"], "fast_1.0": 100 * s["fast_1.0"]})
    schema = {"run": pl.String, "method": pl.String, "turn": pl.UInt32, "samples": pl.UInt32, "csr": pl.Float64,
              "fcr": pl.Float64, "fast_1.0": pl.Float64}
    return pl.DataFrame(rows, schema=schema)
