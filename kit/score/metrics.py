"""Benchmark metrics from records: CSR, FCR, fast_p, geometric-mean speedup, pass@k, bootstrap CIs.

Definitions (MobileKernelBench §5.1, KernelBench), all per *system* (a method, or a run and a method):

- **Denominator**: every task of the task table (normally all tasks of the split).  A task with no record
  for a method counts as a failure.  Records of tasks that are not in the table are ignored; a system whose
  records all fall outside the table still gets its rows (every task a failure).
- **Best-of-k**: a task is *compiled* if any sample's status is in :data:`~kit.results.records.COMPILED`, *correct*
  if any sample's status is in :data:`~kit.results.records.CORRECT`; its speedup is the largest scorable speedup
  among its samples, its ``speedup_ci_low`` the largest CI low bound among those samples.
- **Scorable speedup** (:func:`kit.results.rules.scorable_speedup`): a positive finite ``speedup`` of an ``ok``
  sample, not measured under emulation (``timing_emulated``), not untimeable (``timing_untimeable``), not
  flagged ``implausible_speedup`` and not on a task without a native baseline.  ``timing_failed`` counts for
  CSR and FCR, never for fast_p or the geomean, whatever its speedup fields hold.
- **No-native rule**: a task where any record has ``error_kind == "no_native"`` (MNN's own kernel cannot
  convert or run, so no speedup exists) counts for CSR and FCR like any task, stays in every denominator,
  but never counts in a fast_p numerator nor in the geometric mean; listed in ``no_native_tasks``.
- **Harness errors** (``harness_error``: the kit's fault; a resumed run retries the job): a failed sample;
  a task whose records are all harness errors counts as missing (``n_missing``) and is listed in
  ``harness_error_tasks``; ``n_harness_errors`` counts the harness-error samples of the group.
- ``csr`` = compiled tasks / tasks; ``fcr`` = correct tasks / tasks;
  ``fast_<p>`` = correct tasks with speedup > p / tasks.  Unlike KernelBench, whose fast_0 is the
  correctness rate, a correct task without a scorable speedup never counts, so fast_0 <= FCR;
  ``fast_sig_<p>`` = correct tasks with speedup_ci_low > p / tasks, and, for a task with a noise figure
  ``noise_log`` (``noise``: A/A calibration, :mod:`kit.results.rules`), speedup > p · exp(noise_log) too;
  ``geomean_speedup`` = exp(mean(log speedup)) over correct tasks with a scorable speedup (null if none);
  ``pass@<k>`` = mean over **every** task of 1 - C(n-c, k) / C(n, k) (Chen et al. 2021), n samples of which
  c correct; a task's missing samples count as failed samples, so a task with n < k samples scores 1 if any
  sample is correct else 0, and a task without records 0 (:func:`kit.results.rules.task_pass_at_k`).
- **Strict**: ``fcr_strict`` = tasks with a sample that is correct and passed every edge input set native MNN
  passes (:func:`kit.results.rules.edges_pass`) / tasks; ``fast_strict_<p>`` as ``fast_<p>`` over those samples'
  speedups.  A task without edge sets has strict = plain.  ``failed_edges`` names, per task, the edge sets its
  correct samples failed.
- **Native-incorrect rule**: a task whose pinned native build disagrees with ONNX Runtime (the audit's mark,
  :mod:`kit.suite.nativemarks`; the task table's ``native_incorrect`` column, :func:`with_native_rule`) counts
  for CSR and FCR but, unless ``report.score_native_incorrect``, never in a fast_p numerator nor the geometric
  mean (its speedup is over a native that does not compute the op); listed in ``native_incorrect_tasks``.
- Rates are fractions in [0, 1]; ``<metric>_ci_low`` / ``_ci_high`` are percentile bootstrap 95 % CIs
  from resampling the tasks of the group with replacement (seeded, ``n_boot`` resamples).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import polars as pl

from kit.results import rules as scoring
from kit.results.records import COMPILED, CORRECT, ErrorKind, Status
from kit.results.rules import pass_at_k  # noqa: F401 - re-exported: kit.score.metrics.pass_at_k is the public name
from kit.score.groupstats import Bootstrap, group_geomean, group_pass_at_k, group_rates, with_pass_at_k

DEFAULT_PS: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0)
DEFAULT_KS: tuple[int, ...] = (1,)
#: columns that come from the task table; any other grouping column comes from the records
TASK_COLUMNS: tuple[str, ...] = ("category", "split")
REQUIRED_RECORD_COLUMNS: tuple[str, ...] = (
    "method", "task_id", "sample_id", "status", "error_kind", "speedup", "speedup_ci_low", "timing_emulated",
)
REQUIRED_TASK_COLUMNS: tuple[str, ...] = ("task_id", "category", "split")

_COMPILED = [s.value for s in COMPILED]
_CORRECT = [s.value for s in CORRECT]
_STATUSES = [s.value for s in Status]


@dataclass(frozen=True)
class NativeRule:
    """The native-incorrect rule (module docstring): ``marks``, task id → the pinned native build's mismatch with
    ONNX Runtime (:func:`kit.suite.nativemarks.read_marks`), and whether those tasks' speedups are ``scored``
    anyway (``report.score_native_incorrect``)."""

    marks: Mapping[str, str] = field(default_factory=dict)
    scored: bool = False


def with_native_rule(tasks: pl.DataFrame | Iterable, rule: NativeRule | None) -> pl.DataFrame:
    """The task table of ``tasks`` with the Boolean column ``native_incorrect`` of ``rule`` (module docstring): true
    for the marked tasks unless ``rule.scored``; ``tasks`` as a table unchanged when ``rule`` is None."""
    table = as_task_table(tasks)
    if rule is None:
        return table
    return table.with_columns(native_incorrect=pl.col("task_id").is_in(sorted(rule.marks)) & (not rule.scored))


class MetricsError(Exception):
    """Records or the task table are unusable (missing column, duplicate, unknown status); names it."""


def fast_col(p: float) -> str:
    """Column name of fast_p: ``fast_0``, ``fast_0.5``, ``fast_1.0``, ..."""
    return "fast_0" if p == 0 else f"fast_{float(p)}"


def fast_strict_col(p: float) -> str:
    """Column name of the strict fast_p: ``fast_strict_0``, ``fast_strict_1.0``, ..."""
    return "fast_strict_0" if p == 0 else f"fast_strict_{float(p)}"


def fast_sig_col(p: float) -> str:
    """Column name of the significant fast_p: ``fast_sig_0``, ``fast_sig_1.0``, ..."""
    return "fast_sig_0" if p == 0 else f"fast_sig_{float(p)}"


def tasks_frame(tasks: Iterable) -> pl.DataFrame:
    """The task table (``task_id``, ``category``, ``split``, all String) from :class:`kit.suite.tasks.Task` objects."""
    rows = [{"task_id": t.id, "category": t.category, "split": t.split} for t in tasks]
    return pl.DataFrame(rows, schema={"task_id": pl.String, "category": pl.String, "split": pl.String})


def as_task_table(tasks: pl.DataFrame | Iterable) -> pl.DataFrame:
    """``tasks`` itself if it is a DataFrame, else :func:`tasks_frame` of it."""
    return tasks if isinstance(tasks, pl.DataFrame) else tasks_frame(tasks)


def _check(records: pl.DataFrame, tasks: pl.DataFrame, keys: Sequence[str]) -> None:
    for col in (*REQUIRED_RECORD_COLUMNS, *keys):
        if col not in records.columns:
            raise MetricsError(f"records: missing column {col!r}")
    for col in REQUIRED_TASK_COLUMNS:
        if col not in tasks.columns:
            raise MetricsError(f"tasks: missing column {col!r}")
    dup = tasks.filter(pl.col("task_id").is_duplicated())["task_id"].unique().to_list()
    if dup:
        raise MetricsError(f"tasks: duplicate task_id {sorted(dup)}")
    bad = set(records["status"].unique().to_list()) - set(_STATUSES)
    if bad:
        raise MetricsError(f"records: unknown status values {sorted(map(str, bad))}")
    dup = records.filter(pl.struct(*keys, "task_id", "sample_id").is_duplicated())
    if dup.height:
        first = dup.row(0, named=True)
        raise MetricsError(
            "records: duplicate sample "
            + ", ".join(f"{c}={first[c]!r}" for c in (*keys, "task_id", "sample_id"))
            + " (label runs with a separate key column before combining them)"
        )


def per_task(
    records: pl.DataFrame | pl.LazyFrame,
    tasks: pl.DataFrame | Iterable,
    keys: Sequence[str] = ("method",),
    noise: dict[str, float] | None = None,
) -> pl.DataFrame:
    """Best-of-k outcome of every (system, task): one row per combination of ``keys`` values × every task.

    Args:
        records: one row per job (:data:`kit.results.shards.SHARD_SCHEMA` columns; at least
            :data:`REQUIRED_RECORD_COLUMNS`; :data:`kit.results.rules.OPTIONAL_COLUMNS` read as null if absent).
        tasks: ``task_id``, ``category``, ``split`` (String), one row per task: the denominator; or a
            list of :class:`kit.suite.tasks.Task`.  An optional Boolean ``native_incorrect`` marks the tasks of
            the native-incorrect rule (:func:`with_native_rule`).
        keys: record columns that identify a system; every system of ``records`` gets rows.
        noise: task id → ``noise_log`` (A/A 95 % half-width, log scale, >= 0); absent or None: no figure.

    Returns:
        ``keys``, ``task_id``, ``category``, ``split``, ``n_samples``, ``n_correct``, ``n_harness_errors``
        (u32), ``compiled``, ``correct``, ``no_native``, ``harness_only`` (bool: records, all harness
        errors), ``emulated``, ``untimeable``, ``implausible`` (bool: a correct sample was timed under
        emulation / untimeable / flagged implausible, and the task has no scorable speedup), ``speedup`` and
        ``speedup_ci_low`` (f64 best scorable values, null if none), ``noise_log`` (f64, null without a
        figure) and ``inside_noise`` (bool, |ln speedup| <= noise_log; null without speedup or figure);
        ``correct_strict`` (bool), ``speedup_strict`` (f64: over strictly correct samples), ``failed_edges``
        (list[str]: edge sets correct samples failed), ``native_incorrect`` and ``fast_excluded`` (bool: no fast_p,
        the no-native rule or the native-incorrect rule).

    Raises:
        MetricsError: a missing column, a duplicate task or sample, an unknown status, a bad noise figure.
    """
    records = records.collect() if isinstance(records, pl.LazyFrame) else records
    records = scoring.with_optional_columns(records)
    tasks = as_task_table(tasks)
    keys = list(keys)
    _check(records, tasks, keys)
    marked = tasks.filter(pl.col("native_incorrect").fill_null(False))["task_id"].to_list() \
        if "native_incorrect" in tasks.columns else []
    tasks = tasks.select(REQUIRED_TASK_COLUMNS)
    systems = records.select(keys).unique()  # before the task filter: a system never vanishes
    records = records.filter(pl.col("task_id").is_in(tasks["task_id"].implode()))
    no_native = sorted(set(records.filter(pl.col("error_kind") == ErrorKind.NO_NATIVE.value)["task_id"].to_list()))

    is_correct, scorable = scoring.is_correct(), scoring.scorable_speedup(no_native)
    agg = records.group_by([*keys, "task_id"]).agg(
        n_samples=pl.len(),
        n_correct=is_correct.sum(),
        n_harness_errors=scoring.is_harness_error().sum(),
        compiled=pl.col("status").is_in(_COMPILED).any(),
        correct=is_correct.any(),
        emulated=(is_correct & pl.col("timing_emulated").fill_null(False)).any(),
        untimeable=(is_correct & scoring.is_untimeable()).any(),
        implausible=(is_correct & scoring.is_implausible()).any(),
        speedup=pl.col("speedup").filter(scorable).max(),
        speedup_ci_low=pl.col("speedup_ci_low").filter(scorable & pl.col("speedup_ci_low").is_finite()).max(),
        correct_strict=(is_correct & scoring.edges_pass()).any(),
        speedup_strict=pl.col("speedup").filter(scorable & scoring.edges_pass()).max(),
        failed_edges=scoring.failed_edges().filter(is_correct).list.explode(keep_nulls=False, empty_as_null=False).unique().sort(),
    )
    unscored = ("emulated", "untimeable", "implausible")
    out = systems.join(tasks, how="cross").join(agg, on=[*keys, "task_id"], how="left").with_columns(
        pl.col("n_samples", "n_correct", "n_harness_errors").fill_null(0).cast(pl.UInt32),
        pl.col("compiled", "correct", "correct_strict", *unscored).fill_null(False),
        pl.col("failed_edges").fill_null(pl.lit([], dtype=pl.List(pl.String))),
        no_native=pl.col("task_id").is_in(no_native),
        native_incorrect=pl.col("task_id").is_in(marked),
    )
    out = out.with_columns(fast_excluded=pl.col("no_native") | pl.col("native_incorrect"))
    # why a correct task has no speedup: kept only where no other sample of the task gave a scorable one
    out = out.with_columns(pl.col(c) & pl.col("speedup").is_null() for c in unscored).with_columns(
        harness_only=(pl.col("n_samples") > 0) & (pl.col("n_harness_errors") == pl.col("n_samples"))
    )
    out = out.join(_noise_frame(noise), on="task_id", how="left")
    return out.with_columns(inside_noise=scoring.inside_noise(pl.col("speedup"), pl.col("noise_log"))).sort(
        [*keys, "task_id"])


def _noise_frame(noise: dict[str, float] | None) -> pl.DataFrame:
    """``task_id``, ``noise_log`` (f64) of the tasks of ``noise`` that have a figure.

    Raises:
        MetricsError: a figure that is not a finite number >= 0 (names the task).
    """
    rows = {t: v for t, v in (noise or {}).items() if v is not None}
    for t, v in rows.items():
        if not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
            raise MetricsError(f"noise: task {t!r} has noise_log {v!r}; expected a finite number >= 0")
    return pl.DataFrame({"task_id": list(rows), "noise_log": [float(v) for v in rows.values()]},
                        schema={"task_id": pl.String, "noise_log": pl.Float64})


#: count columns of a :func:`summary` row (u32), in output order
_COUNT_COLUMNS: tuple[str, ...] = (
    "n_tasks", "n_missing", "n_compiled", "n_correct", "n_correct_strict", "n_with_speedup", "n_no_native",
    "n_native_incorrect", "n_emulated", "n_untimeable", "n_implausible", "n_harness_errors",
)
#: list[str] columns of a :func:`summary` row: the group's tasks of each kind, sorted
TASK_LIST_COLUMNS: dict[str, str] = {
    "no_native_tasks": "no_native",
    "harness_error_tasks": "harness_only",
    "untimeable_tasks": "untimeable",
    "native_incorrect_tasks": "native_incorrect",
}


def _fast_indicators(ps: Sequence[float]) -> dict[str, pl.Expr]:
    """Per-task bool expressions ``fast_<p>`` and ``fast_sig_<p>`` for every p of ``ps``.

    Rule (module docstring, MobileKernelBench §5.1): a correct task counts for ``fast_<p>`` if its best
    scorable speedup is > p and for ``fast_sig_<p>`` if its best ``speedup_ci_low`` is > p and its speedup is
    beyond its noise band (:func:`kit.results.rules.beyond_noise`); a no-native task never counts; a null speedup
    does not count (``fill_null(False)``); ``fast_strict_<p>``: a strictly correct task whose best strictly
    correct sample's speedup is > p.  A task of ``fast_excluded`` (no native, or native incorrect) never counts.
    """
    counted = pl.col("correct") & ~pl.col("fast_excluded")
    exprs = {}
    for p in ps:
        exprs[fast_col(p)] = (counted & (pl.col("speedup") > p)).fill_null(False)
        beyond = scoring.beyond_noise(pl.col("speedup"), pl.col("noise_log"), p)
        exprs[fast_sig_col(p)] = (counted & (pl.col("speedup_ci_low") > p) & beyond).fill_null(False)
    strict = pl.col("correct_strict") & ~pl.col("fast_excluded")
    for p in ps:
        exprs[fast_strict_col(p)] = (strict & (pl.col("speedup_strict") > p)).fill_null(False)
    return exprs


def _with_rate_indicators(pt: pl.DataFrame, ps: Sequence[float]) -> tuple[pl.DataFrame, list[str]]:
    """``pt`` (a :func:`per_task` frame) with the bool per-task indicators of every rate, and their names.

    Adds ``csr`` (= ``compiled``), ``fcr`` (= ``correct``), ``fcr_strict`` (= ``correct_strict``) and
    :func:`_fast_indicators`; a rate of a group is the mean of its indicator over the group's tasks (module
    docstring, MobileKernelBench §5.1).
    """
    fast_exprs = _fast_indicators(ps)
    rate_cols = ["csr", "fcr", "fcr_strict", *fast_exprs]
    return pt.with_columns(csr=pl.col("compiled"), fcr=pl.col("correct"), fcr_strict=pl.col("correct_strict"),
                           **fast_exprs), rate_cols


def _group_counts(g: pl.DataFrame) -> dict[str, int]:
    """The :data:`_COUNT_COLUMNS` of one group of per-task rows.

    ``n_tasks`` counts every task of the table (the denominator, module docstring); ``n_missing`` the tasks
    with no record or only harness errors; ``n_harness_errors`` the harness-error samples; the others count
    the per-task flags of :func:`per_task` (``n_with_speedup``: a scorable best speedup).
    """
    return dict(
        n_tasks=g.height,
        n_missing=int(((g["n_samples"] == 0) | g["harness_only"]).sum()),
        n_compiled=int(g["compiled"].sum()),
        n_correct=int(g["correct"].sum()),
        n_correct_strict=int(g["correct_strict"].sum()),
        n_with_speedup=int(g["speedup"].filter(~g["fast_excluded"]).is_not_null().sum()),
        n_no_native=int(g["no_native"].sum()),
        n_native_incorrect=int(g["native_incorrect"].sum()),
        n_emulated=int(g["emulated"].sum()),
        n_untimeable=int(g["untimeable"].sum()),
        n_implausible=int(g["implausible"].sum()),
        n_harness_errors=int(g["n_harness_errors"].sum()),
    )


def _group_row(by: Sequence[str], group_key: tuple, g: pl.DataFrame, rate_cols: Sequence[str],
               ks: Sequence[int], boot: Bootstrap) -> dict:
    """One :func:`summary` row (a dict) for the group ``group_key`` of ``by`` with per-task rows ``g``.

    The :data:`TASK_LIST_COLUMNS` list the group's tasks under the no-native rule, left with only harness
    errors, and untimeable (module docstring), sorted.
    """
    row = dict(zip(by, group_key))
    row.update(_group_counts(g))
    row.update(group_rates(g, rate_cols, boot.n, boot.seed))
    row["geomean_speedup"] = group_geomean(g)
    row.update(group_pass_at_k(g, ks))
    for col, flag in TASK_LIST_COLUMNS.items():
        row[col] = sorted(g.filter(pl.col(flag))["task_id"].to_list())
    return row


def _summary_schema(pt: pl.DataFrame, by: Sequence[str], rate_cols: Sequence[str],
                    ks: Sequence[int]) -> dict[str, pl.DataType]:
    """The column → dtype of a :func:`summary` frame, in output order.

    ``by`` columns keep their :func:`per_task` dtype; counts u32; rates, CIs, ``geomean_speedup`` and
    ``pass@<k>`` f64; ``pass@<k>_tasks`` u32; :data:`TASK_LIST_COLUMNS` list[str].
    """
    schema: dict[str, pl.DataType] = {c: pt.schema[c] for c in by}
    for c in _COUNT_COLUMNS:
        schema[c] = pl.UInt32()
    for c in rate_cols:
        schema[c] = schema[f"{c}_ci_low"] = schema[f"{c}_ci_high"] = pl.Float64()
    schema["geomean_speedup"] = pl.Float64()
    for k in ks:
        schema[f"pass@{k}"] = pl.Float64()
        schema[f"pass@{k}_tasks"] = pl.UInt32()
    for c in TASK_LIST_COLUMNS:
        schema[c] = pl.List(pl.String)
    # order columns: keys, counts, then each rate next to its CI
    ordered = [*by, *_COUNT_COLUMNS]
    for c in rate_cols:
        ordered += [c, f"{c}_ci_low", f"{c}_ci_high"]
    ordered += ["geomean_speedup", *[x for k in ks for x in (f"pass@{k}", f"pass@{k}_tasks")], *TASK_LIST_COLUMNS]
    return {c: schema[c] for c in ordered}


def summary(
    records: pl.DataFrame | pl.LazyFrame,
    tasks: pl.DataFrame | Iterable,
    ps: Sequence[float] = DEFAULT_PS,
    by: Sequence[str] = ("method",),
    ks: Sequence[int] = DEFAULT_KS,
    boot: Bootstrap | None = None,
    noise: dict[str, float] | None = None,
) -> pl.DataFrame:
    """Metrics per group (see the module docstring for the definitions).

    Args:
        records, tasks: as for :func:`per_task`.
        ps: thresholds p of fast_p.
        by: grouping columns; ``category`` and ``split`` come from the task table, the others identify a
            system and come from the records (e.g. ``("method",)``, ``("method", "category")``,
            ``("run", "method")``).
        ks: k values of pass@k.
        boot: the bootstrap of the CIs (:class:`Bootstrap`: resamples and seed; None: its defaults).
        noise: task id → ``noise_log`` for ``fast_sig_<p>`` (as for :func:`per_task`); None: no noise data,
            ``fast_sig_<p>`` is the CI rule alone.

    Returns:
        One row per group, sorted by ``by``: ``by`` columns; ``n_tasks``, ``n_missing`` (tasks without
        any record or with only harness errors), ``n_compiled``, ``n_correct``, ``n_with_speedup``,
        ``n_correct_strict``, ``n_no_native``, ``n_native_incorrect``, ``n_emulated``, ``n_untimeable``,
        ``n_implausible`` (tasks), ``n_harness_errors`` (samples) (u32); ``csr``, ``fcr``, ``fcr_strict``,
        ``fast_<p>``, ``fast_sig_<p>``, ``fast_strict_<p>`` (f64 fractions) each with
        ``_ci_low`` and ``_ci_high``; ``geomean_speedup`` (f64, null if no task has a speedup); ``pass@<k>``
        (f64) and ``pass@<k>_tasks`` (u32); ``no_native_tasks``, ``harness_error_tasks``,
        ``untimeable_tasks``, ``native_incorrect_tasks`` (list[str]).
    """
    by = list(by)
    keys = [c for c in by if c not in TASK_COLUMNS]
    if not keys:
        raise MetricsError(f"by={by}: add a record column that identifies a system, e.g. 'method'")
    pt = per_task(records, tasks, keys, noise)
    pt, rate_cols = _with_rate_indicators(pt, ps)
    pt = with_pass_at_k(pt, ks)
    rows = [
        _group_row(by, group_key, g, rate_cols, ks, boot or Bootstrap())
        for group_key, g in pt.group_by(by, maintain_order=False)
    ]
    df = pl.DataFrame(rows, schema=_summary_schema(pt, by, rate_cols, ks), orient="row")
    return df.sort(by)
