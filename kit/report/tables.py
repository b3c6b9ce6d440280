"""The report's numbers and tables: each run's metrics (:func:`score_runs`) and the display tables built
from them (headline, per category, per-task speedups, outcomes by status and error kind, common compile
errors, tasks without a native baseline, untimeable or left with harness errors, flagged candidates,
provenance)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import polars as pl

from kit.report.data import PROVENANCE_KEYS, Run
from kit.results import rules as scoring
from kit.results.records import Status
from kit.score import metrics

HEADLINE_PS: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0)
TOP_ERRORS = 15


_QUOTED = re.compile(r"(‘[^’]*’|'[^']*'|\"[^\"]*\"|`[^`]*')")
_LOCATION = re.compile(r"^\S+?:\d+(:\d+)?:\s*((fatal )?error|warning|note):\s*")
_NUMBER = re.compile(r"\b0x[0-9a-fA-F]+\b|\b\d+\b")


def normalize_message(msg: str) -> str:
    """A compiler message with location, quoted names and numbers replaced, for grouping like errors.

    ``"a.cpp:3:5: error: ‘foo’ was not declared in this scope"`` → ``"‘…’ was not declared in this scope"``.
    """
    line = msg.strip().splitlines()[0] if msg.strip() else ""
    line = _LOCATION.sub("", line)
    line = _QUOTED.sub("‘…’", line)
    line = _NUMBER.sub("N", line)
    return re.sub(r"\s+", " ", line).strip()[:200]


def _first_error(row: dict[str, Any]) -> str:
    diags = row.get("diagnostics") or []
    for d in diags:
        if d.get("severity") in ("error", "fatal error", "linker"):
            return d.get("message") or ""
    if diags:
        return diags[0].get("message") or ""
    return row.get("error_message") or row.get("build_log_tail") or ""


def compile_errors(records: pl.DataFrame, top: int = TOP_ERRORS) -> pl.DataFrame:
    """Most common normalized first error messages of ``compile_error`` records.

    Returns: ``message`` (normalized), ``count`` (u32), ``systems`` (str, comma-separated), ``example`` (str).
    """
    rows = []
    for r in records.filter(pl.col("status") == Status.COMPILE_ERROR.value).iter_rows(named=True):
        raw = _first_error(r)
        rows.append(
            {"message": normalize_message(raw) or "(no message)", "system": r["system"], "example": raw[:300]}
        )
    if not rows:
        return pl.DataFrame(
            schema={"message": pl.String, "count": pl.UInt32, "systems": pl.String, "example": pl.String}
        )
    df = pl.DataFrame(rows)
    return (
        df.group_by("message")
        .agg(
            count=pl.len(),
            systems=pl.col("system").unique().sort().str.join(", "),
            example=pl.col("example").first(),
        )
        .sort(["count", "message"], descending=[True, False])
        .head(top)
    )


def failures(records: pl.DataFrame) -> pl.DataFrame:
    """Samples per system, status and error kind: ``system``, ``status``, ``error_kind``, ``count``, ``share``."""
    return (
        records.group_by("system", "status", "error_kind")
        .agg(count=pl.len())
        .with_columns(share=pl.col("count") / pl.col("count").sum().over("system"))
        .sort(["system", "count"], descending=[False, True])
    )


def _fmt_rate(v: float | None, lo: float | None = None, hi: float | None = None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    s = f"{100 * v:.1f}"
    if lo is not None and hi is not None and not (math.isnan(lo) or math.isnan(hi)):
        s += f" [{100 * lo:.1f}, {100 * hi:.1f}]"
    return s


def headline_table(summary: pl.DataFrame, ps: tuple[float, ...]) -> pl.DataFrame:
    """Display table (strings): system, tasks, CSR, FCR, fast_p (percent with 95 % CI), geomean speedup."""
    out = []
    keys = [c for c in ("system", "split") if c in summary.columns]
    for r in summary.iter_rows(named=True):
        row = {k: r[k] for k in keys}
        row["tasks"] = str(r["n_tasks"])
        for name, col in (
            ("CSR %", "csr"),
            ("FCR %", "fcr"),
            ("FCR strict %", "fcr_strict"),
            *((f"{metrics.fast_col(p)} %", metrics.fast_col(p)) for p in ps),
            *((f"{metrics.fast_strict_col(p)} %", metrics.fast_strict_col(p)) for p in ps if p == 1.0),
        ):
            if col in r:  # a summary of an older kit has no strict columns
                row[name] = _fmt_rate(r[col], r[f"{col}_ci_low"], r[f"{col}_ci_high"])
        g = r["geomean_speedup"]
        sig = metrics.fast_sig_col(1.0)
        if sig in r:
            row["fast_sig_1.0 %"] = _fmt_rate(r[sig], r[f"{sig}_ci_low"], r[f"{sig}_ci_high"])
        row["geomean speedup"] = "n/a" if g is None else f"{g:.3f}"
        row["no native"] = str(r["n_no_native"])
        row["native incorrect"] = str(r.get("n_native_incorrect", 0))
        row["emulated"] = str(r["n_emulated"])
        row["untimeable"] = str(r["n_untimeable"])
        row["implausible"] = str(r["n_implausible"])
        row["harness errors"] = str(r["n_harness_errors"])
        out.append(row)
    return pl.DataFrame(out, schema=list(out[0]) if out else ["system"])


def category_table(by_cat: pl.DataFrame, categories: list[str]) -> pl.DataFrame:
    """Display table: one row per category (in ``categories`` order), its number of tasks (``tasks``, a string:
    ``varies`` where the systems' denominators differ, a run of a task selection beside a whole split), one
    column per system holding ``"CSR / FCR / fast_1.0"`` in percent, ``(of N)`` added where the counts differ."""
    if by_cat.height == 0:
        return pl.DataFrame(schema={"category": pl.String})
    cell = pl.format(
        "{} / {} / {}", *[pl.col(c).mul(100).round(1).cast(pl.String) for c in ("csr", "fcr", "fast_1.0")]
    )
    order = {c: i for i, c in enumerate(categories)}
    counts = by_cat.group_by("category").agg(varies=pl.col("n_tasks").n_unique() > 1, n=pl.col("n_tasks").max())
    rows = by_cat.select("system", "category", "n_tasks", cell.alias("cell")).join(counts, on="category").with_columns(
        cell=pl.when(pl.col("varies")).then(pl.format("{} (of {})", "cell", "n_tasks")).otherwise("cell"))
    tasks = counts.select("category", tasks=pl.when(pl.col("varies")).then(pl.lit("varies"))
                          .otherwise(pl.col("n").cast(pl.String)))
    return (
        rows.pivot(on="system", index="category", values="cell")
        .join(tasks, on="category")
        .select("category", "tasks", pl.exclude("category", "tasks"))
        .sort(pl.col("category").replace_strict(order, default=len(order)))
    )


def status_table(fail: pl.DataFrame) -> pl.DataFrame:
    """Samples per status (rows, in :class:`~kit.results.records.Status` order) and system (columns), from
    :func:`failures`."""
    status_order = {s.value: i for i, s in enumerate(Status)}
    return (
        fail.group_by("system", "status")
        .agg(pl.col("count").sum())
        .sort("system")
        .pivot(on="system", index="status", values="count")
        .fill_null(0)
        .sort(pl.col("status").replace_strict(status_order, default=len(status_order)))
    )


def kind_table(fail: pl.DataFrame) -> pl.DataFrame:
    """The rows of :func:`failures` that are not ``ok``, the share in percent (``% of samples``)."""
    return fail.filter(pl.col("status") != Status.OK.value).select(
        "system", "status", "error_kind", "count", pl.col("share").mul(100).round(1).alias("% of samples")
    )


def task_list_table(summary: pl.DataFrame, column: str, header: str) -> pl.DataFrame:
    """``system`` and its list column ``column`` of :func:`kit.score.metrics.summary` (comma-separated, headed
    ``header``), for the systems that have any."""
    return summary.select("system", pl.col(column).list.join(", ").alias(header)).filter(pl.col(header) != "")


def no_native_table(summary: pl.DataFrame) -> pl.DataFrame:
    """``system`` and its ``no_native_tasks`` (comma-separated), for the systems that have any."""
    return task_list_table(summary, "no_native_tasks", "tasks without native baseline")


def native_incorrect_table(marks: dict[str, str]) -> pl.DataFrame:
    """The tasks the audit marked ``native_incorrect`` (:mod:`kit.suite.nativemarks`): ``task_id`` and the
    native build's ``mismatch`` with ONNX Runtime, sorted."""
    return pl.DataFrame({"task_id": sorted(marks), "mismatch": [marks[t] for t in sorted(marks)]},
                        schema={"task_id": pl.String, "mismatch": pl.String})


def edge_failures_table(per_task: pl.DataFrame) -> pl.DataFrame:
    """Per system and task, the edge sets its correct samples failed (``failed_edges`` of
    :func:`kit.score.metrics.per_task`; only the tasks with any), and whether a sample is strictly correct."""
    pt = per_task.filter(pl.col("failed_edges").list.len() > 0)
    return pt.select("system", "task_id", failed_edges=pl.col("failed_edges").list.join(", "),
                     strict=pl.col("correct_strict")).sort("system", "task_id")


def untimeable_table(summary: pl.DataFrame, runs: list[Run]) -> pl.DataFrame:
    """The untimeable tasks: per system (its correct samples timed untimeable, no scorable speedup), then per
    run whose calibration marks tasks untimeable (``<run> calibration``)."""
    header = "untimeable tasks"
    calib = [{"system": f"{r.label} calibration", header: ", ".join(r.calibration["untimeable_tasks"])}
             for r in runs if r.calibration and r.calibration.get("untimeable_tasks")]
    return pl.concat([task_list_table(summary, "untimeable_tasks", header),
                      pl.DataFrame(calib, schema={"system": pl.String, header: pl.String})])


def flagged_table(records: pl.DataFrame) -> pl.DataFrame:
    """Every record that carries flags (``flags``; null in older records): ``system``, ``task_id``,
    ``sample_id``, ``status``, ``speedup``, ``flags`` (the codes) and ``reasons``, sorted."""
    recs = scoring.with_optional_columns(records).filter(pl.col("flags").list.len().fill_null(0) > 0)
    return recs.select(
        "system", "task_id", "sample_id", "status", "speedup",
        flags=_flag_field("code").list.join(", "), reasons=_flag_field("reason").list.join("; "),
    ).sort("system", "task_id", "sample_id")


def _flag_field(name: str) -> pl.Expr:
    """The list of field ``name`` of each record's flags."""
    return pl.col("flags").list.eval(pl.element().struct.field(name))


#: the mark of a per-task speedup inside its task's A/A noise band
INSIDE_NOISE_MARK = "~"


def speedup_table(per_task: pl.DataFrame) -> pl.DataFrame:
    """Per-task best scorable speedups: one row per task that has one for some system (sorted), one column
    per system holding ``"1.234"``, followed by :data:`INSIDE_NOISE_MARK` when |ln speedup| <= the task's
    ``noise_log`` (:func:`kit.score.metrics.per_task`); empty where the system has none."""
    timed = per_task.filter(pl.col("speedup").is_not_null())
    if timed.height == 0:
        return pl.DataFrame(schema={"task_id": pl.String})
    mark = pl.when(pl.col("inside_noise").fill_null(False)).then(pl.lit(" " + INSIDE_NOISE_MARK)).otherwise(pl.lit(""))
    cell = pl.format("{}{}", pl.col("speedup").round(3).cast(pl.String), mark)
    systems = timed["system"].unique(maintain_order=True).to_list()
    wide = timed.select("task_id", "system", cell.alias("cell")).pivot(on="system", index="task_id", values="cell")
    return wide.select("task_id", *systems).fill_null("").sort("task_id")


def provenance_table(runs: list[Run]) -> pl.DataFrame:
    """One row per key of :data:`~kit.report.data.PROVENANCE_KEYS`, one column per run (its label)."""
    return pl.DataFrame(
        {"key": list(PROVENANCE_KEYS), **{r.label: [r.provenance[k] for k in PROVENANCE_KEYS] for r in runs}}
    )


def category_order(task_table: pl.DataFrame) -> list[str]:
    """The categories of ``task_table``: those of :data:`kit.suite.tasks.CATEGORIES` in that order, then the others
    sorted."""
    from kit.suite.tasks import CATEGORIES

    present = set(task_table["category"].to_list())
    return [c for c in CATEGORIES if c in present] + sorted(present - set(CATEGORIES))


@dataclass(frozen=True)
class Scores:
    """The metrics of a report's runs (:func:`score_runs`)."""

    summary: pl.DataFrame
    """:func:`kit.score.metrics.summary` by run, method, system (and split when there are several), sorted"""
    by_cat: pl.DataFrame
    """the same per category"""
    per_task: pl.DataFrame
    """:func:`kit.score.metrics.per_task` by run, method and system"""
    fail: pl.DataFrame
    """:func:`failures` of every run's records"""
    errors: pl.DataFrame
    """:func:`compile_errors` of every run's records"""
    flagged: pl.DataFrame
    """:func:`flagged_table` of every run's records"""
    splits: list[str]
    """the splits of the runs' denominators, sorted"""
    categories: list[str]
    """:func:`category_order` of the runs' denominators"""
    calibration: dict[str, Any] | None
    """the first run's noise floor band that has one"""

    def relabel(self, df: pl.DataFrame) -> pl.DataFrame:
        """``df`` with each ``system`` followed by ``[split]`` when the report has several splits."""
        if len(self.splits) > 1:  # plots label each system with its split
            return df.with_columns(system=pl.col("system") + " [" + pl.col("split") + "]")
        return df


def score_runs(runs: list[Run], ps: tuple[float, ...], n_boot: int, seed: int,
               native: metrics.NativeRule | None = None) -> Scores:
    """Metrics of ``runs`` at the fast_p thresholds ``ps``, each run over its own denominator; ``native``: the
    tasks the audit marked native_incorrect (:func:`kit.score.metrics.summary`).

    Raises:
        kit.score.metrics.MetricsError: records unusable for metrics.
    """
    records = pl.concat([r.records for r in runs], how="diagonal_relaxed")
    task_table = pl.concat([r.tasks for r in runs]).unique(subset="task_id", keep="first").sort("task_id")
    used = task_table["split"].unique().sort()
    split_key = ["split"] if used.len() > 1 else []

    # metrics per run (so a task without native baseline in one run does not affect another run), each with
    # the per-task noise bands of its own calibration
    summ_parts, cat_parts, pt_parts = [], [], []
    for r in runs:
        noise = (r.calibration or {}).get("noise") or None
        tasks = metrics.with_native_rule(r.tasks, native)
        for parts, extra in ((summ_parts, ()), (cat_parts, ("category",))):
            by = ("run", "method", "system", *split_key, *extra)
            boot = metrics.Bootstrap(n_boot, seed)
            parts.append(metrics.summary(r.records, tasks, ps=ps, by=by, boot=boot, noise=noise))
        pt_parts.append(metrics.per_task(r.records, tasks, keys=("run", "method", "system"), noise=noise))
    return Scores(
        summary=pl.concat(summ_parts, how="vertical").sort(["run", "method", *split_key]),
        by_cat=pl.concat(cat_parts, how="vertical").sort(["run", "method", *split_key, "category"]),
        per_task=pl.concat(pt_parts, how="vertical"),
        fail=failures(records),
        errors=compile_errors(records),
        flagged=flagged_table(records),
        splits=used.to_list(),
        categories=category_order(task_table),
        calibration=next((r.calibration for r in runs if r.calibration), None),
    )
