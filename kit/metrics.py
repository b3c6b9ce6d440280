"""Benchmark metrics from records: CSR, FCR, fast_p, geometric-mean speedup, pass@k, bootstrap CIs.

Definitions (MobileKernelBench §5.1, KernelBench), all per *system* (a method, or a run and a method):

- **Denominator**: every task of the task table (normally all tasks of the split).  A task with no record
  for a method counts as a failure.  Records of tasks that are not in the table are ignored.
- **Best-of-k**: a task is *compiled* if any sample's status is in :data:`~kit.records.COMPILED`, *correct*
  if any sample's status is in :data:`~kit.records.CORRECT`; its speedup is the largest scorable speedup
  among its correct samples, its ``speedup_ci_low`` the largest CI low bound among those samples.
- **Scorable speedup**: a non-null ``speedup`` of a correct sample, not measured under emulation
  (``timing_emulated`` true → no speedup) and not on a task without a native baseline.
- **No-native rule**: a task where any record has ``error_kind == "no_native"`` (MNN's own kernel cannot
  convert or run, so no speedup exists) counts for CSR and FCR like any task, stays in every denominator,
  but never counts in a fast_p numerator nor in the geometric mean; such tasks are listed in
  ``no_native_tasks``.
- ``csr`` = compiled tasks / tasks; ``fcr`` = correct tasks / tasks;
  ``fast_<p>`` = correct tasks with speedup > p / tasks;
  ``fast_sig_<p>`` = correct tasks with speedup_ci_low > p / tasks (the speedup CI lies above p);
  ``geomean_speedup`` = exp(mean(log speedup)) over correct tasks with a scorable speedup (null if none);
  ``pass@<k>`` = mean over tasks with n >= k samples of the unbiased estimator
  1 - C(n-c, k) / C(n, k) (Chen et al. 2021), c = correct samples.
- Rates are fractions in [0, 1]; ``<metric>_ci_low`` / ``_ci_high`` are percentile bootstrap 95 % CIs
  from resampling the tasks of the group with replacement (seeded, ``n_boot`` resamples).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import polars as pl

from kit.records import COMPILED, CORRECT, ErrorKind, Status

DEFAULT_PS: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0)
DEFAULT_KS: tuple[int, ...] = (1,)
#: columns that come from the task table; any other grouping column comes from the records
TASK_COLUMNS: tuple[str, ...] = ("category", "split")
REQUIRED_RECORD_COLUMNS: tuple[str, ...] = (
    "method",
    "task_id",
    "sample_id",
    "status",
    "error_kind",
    "speedup",
    "speedup_ci_low",
    "timing_emulated",
)
REQUIRED_TASK_COLUMNS: tuple[str, ...] = ("task_id", "category", "split")

_COMPILED = [s.value for s in COMPILED]
_CORRECT = [s.value for s in CORRECT]
_STATUSES = [s.value for s in Status]


class MetricsError(Exception):
    """Records or the task table are unusable (missing column, duplicate, unknown status); names it."""


def fast_col(p: float) -> str:
    """Column name of fast_p: ``fast_0``, ``fast_0.5``, ``fast_1.0``, ..."""
    return "fast_0" if p == 0 else f"fast_{float(p)}"


def fast_sig_col(p: float) -> str:
    """Column name of the significant fast_p: ``fast_sig_0``, ``fast_sig_1.0``, ..."""
    return "fast_sig_0" if p == 0 else f"fast_sig_{float(p)}"


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k = 1 - C(n-c, k) / C(n, k) for n samples of which c are correct.

    Computed as 1 - prod_{i=n-c+1..n} (1 - k/i), which never forms large binomials.

    Raises:
        ValueError: k < 1, n < k, or c outside [0, n].
    """
    if k < 1 or n < k or not 0 <= c <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n and 0 <= c <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def tasks_frame(tasks: Iterable) -> pl.DataFrame:
    """The task table (``task_id``, ``category``, ``split``, all String) from :class:`kit.tasks.Task` objects."""
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
    records: pl.DataFrame | pl.LazyFrame, tasks: pl.DataFrame | Iterable, keys: Sequence[str] = ("method",)
) -> pl.DataFrame:
    """Best-of-k outcome of every (system, task): one row per combination of ``keys`` values × every task.

    Args:
        records: one row per job (:data:`kit.shards.SHARD_SCHEMA` columns; at least
            :data:`REQUIRED_RECORD_COLUMNS`).
        tasks: ``task_id``, ``category``, ``split`` (String), one row per task: the denominator; or a
            list of :class:`kit.tasks.Task`.
        keys: record columns that identify a system (default ``("method",)``).

    Returns:
        ``keys``, ``task_id``, ``category``, ``split``, ``n_samples`` (u32), ``n_correct`` (u32),
        ``compiled``, ``correct``, ``no_native``, ``emulated`` (bool: a correct sample was timed only under
        emulation), ``speedup`` and ``speedup_ci_low`` (f64 best scorable values, null if none).

    Raises:
        MetricsError: a missing column, a duplicate task or sample, an unknown status.
    """
    records = records.collect() if isinstance(records, pl.LazyFrame) else records
    tasks = as_task_table(tasks)
    keys = list(keys)
    _check(records, tasks, keys)
    tasks = tasks.select(REQUIRED_TASK_COLUMNS)
    records = records.filter(pl.col("task_id").is_in(tasks["task_id"].implode()))
    no_native = set(records.filter(pl.col("error_kind") == ErrorKind.NO_NATIVE.value)["task_id"].to_list())

    is_correct = pl.col("status").is_in(_CORRECT)
    # a speedup is a positive finite ratio; anything else (NaN, inf, <= 0 from a hand-made table) is not scored
    scorable = (
        is_correct
        & pl.col("speedup").is_finite().fill_null(False)
        & (pl.col("speedup") > 0).fill_null(False)
        & ~pl.col("timing_emulated").fill_null(False)
        & ~pl.col("task_id").is_in(sorted(no_native))
    )
    agg = records.group_by([*keys, "task_id"]).agg(
        n_samples=pl.len(),
        n_correct=is_correct.sum(),
        compiled=pl.col("status").is_in(_COMPILED).any(),
        correct=is_correct.any(),
        emulated=(is_correct & pl.col("timing_emulated").fill_null(False)).any(),
        speedup=pl.col("speedup").filter(scorable).max(),
        speedup_ci_low=pl.col("speedup_ci_low").filter(scorable & pl.col("speedup_ci_low").is_finite()).max(),
    )
    systems = records.select(keys).unique()
    grid = systems.join(tasks, how="cross")
    out = grid.join(agg, on=[*keys, "task_id"], how="left").with_columns(
        pl.col("n_samples", "n_correct").fill_null(0).cast(pl.UInt32),
        pl.col("compiled", "correct", "emulated").fill_null(False),
        no_native=pl.col("task_id").is_in(sorted(no_native)),
    )
    # a task with a speedup computed only under emulation has no scorable speedup: emulated stays true
    out = out.with_columns(emulated=pl.col("emulated") & pl.col("speedup").is_null())
    return out.sort([*keys, "task_id"])


def _bootstrap(ind: np.ndarray, n_boot: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Percentile 95 % CI of the column means of ``ind`` (tasks × metrics) over task resamples."""
    n = ind.shape[0]
    if n == 0:
        nan = np.full(ind.shape[1], np.nan)
        return nan, nan
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    means = ind[idx].mean(axis=1)  # n_boot × metrics
    return np.percentile(means, 2.5, axis=0), np.percentile(means, 97.5, axis=0)


#: count columns of a :func:`summary` row (u32), in output order
_COUNT_COLUMNS: tuple[str, ...] = (
    "n_tasks",
    "n_missing",
    "n_compiled",
    "n_correct",
    "n_with_speedup",
    "n_no_native",
    "n_emulated",
)


def _fast_indicators(ps: Sequence[float]) -> dict[str, pl.Expr]:
    """Per-task bool expressions ``fast_<p>`` and ``fast_sig_<p>`` for every p of ``ps``.

    Rule (module docstring, MobileKernelBench §5.1): a correct task counts for ``fast_<p>`` if its best
    speedup is > p and for ``fast_sig_<p>`` if its best ``speedup_ci_low`` is > p; a no-native task never
    counts; a null speedup does not count (``fill_null(False)``).
    """
    counted = pl.col("correct") & ~pl.col("no_native")
    exprs = {}
    for p in ps:
        exprs[fast_col(p)] = (counted & (pl.col("speedup") > p)).fill_null(False)
        exprs[fast_sig_col(p)] = (counted & (pl.col("speedup_ci_low") > p)).fill_null(False)
    return exprs


def _with_rate_indicators(pt: pl.DataFrame, ps: Sequence[float]) -> tuple[pl.DataFrame, list[str]]:
    """``pt`` (a :func:`per_task` frame) with the bool per-task indicators of every rate, and their names.

    Adds ``csr`` (= ``compiled``), ``fcr`` (= ``correct``) and :func:`_fast_indicators`; a rate of a group is
    the mean of its indicator over the group's tasks (module docstring, MobileKernelBench §5.1).
    """
    fast_exprs = _fast_indicators(ps)
    rate_cols = ["csr", "fcr", *fast_exprs]
    return pt.with_columns(csr=pl.col("compiled"), fcr=pl.col("correct"), **fast_exprs), rate_cols


def _with_pass_at_k(pt: pl.DataFrame, ks: Sequence[int]) -> pl.DataFrame:
    """``pt`` with a per-task f64 column ``pass@<k>`` for every k of ``ks``.

    :func:`pass_at_k` of the task's ``n_samples`` and ``n_correct``, null when the task has fewer than k
    samples (unbiased estimator, Chen et al. 2021; module docstring).
    """
    for k in ks:
        pt = pt.with_columns(
            pl.struct("n_samples", "n_correct")
            .map_elements(
                lambda s, k=k: pass_at_k(s["n_samples"], s["n_correct"], k) if s["n_samples"] >= k else None,
                return_dtype=pl.Float64,
            )
            .alias(f"pass@{k}")
        )
    return pt


def _group_counts(g: pl.DataFrame) -> dict[str, int]:
    """The :data:`_COUNT_COLUMNS` of one group of per-task rows.

    ``n_tasks`` counts every task of the table (the denominator, module docstring); ``n_missing`` the tasks
    with no record; the others count the per-task flags of :func:`per_task` (``n_with_speedup``: a
    scorable best speedup).
    """
    return dict(
        n_tasks=g.height,
        n_missing=int((g["n_samples"] == 0).sum()),
        n_compiled=int(g["compiled"].sum()),
        n_correct=int(g["correct"].sum()),
        n_with_speedup=int(g["speedup"].is_not_null().sum()),
        n_no_native=int(g["no_native"].sum()),
        n_emulated=int(g["emulated"].sum()),
    )


def _group_rates(
    g: pl.DataFrame, rate_cols: Sequence[str], n_boot: int, seed: int
) -> dict[str, float | None]:
    """``<rate>``, ``<rate>_ci_low``, ``<rate>_ci_high`` for every rate of ``rate_cols`` in one group.

    A rate is the mean of its per-task indicator over the group's tasks (fraction in [0, 1]); the CI is
    :func:`_bootstrap` over task resamples (module docstring).
    """
    out: dict[str, float | None] = {}
    ind = g.select(rate_cols).cast(pl.Float64).to_numpy()
    lo, hi = _bootstrap(ind, n_boot, seed)
    for j, c in enumerate(rate_cols):
        out[c] = float(ind[:, j].mean()) if g.height else None
        out[f"{c}_ci_low"] = float(lo[j])
        out[f"{c}_ci_high"] = float(hi[j])
    return out


def _group_geomean(g: pl.DataFrame) -> float | None:
    """``geomean_speedup`` of one group: exp(mean(log speedup)) over its tasks with a scorable best
    speedup, null if none (module docstring; :func:`per_task` leaves no-native and emulated tasks null)."""
    sp = g["speedup"].drop_nulls().to_numpy()
    return float(np.exp(np.log(sp).mean())) if sp.size else None


def _group_pass_at_k(g: pl.DataFrame, ks: Sequence[int]) -> dict[str, float | int | None]:
    """``pass@<k>`` (mean of the per-task estimates, null if no task has k samples) and ``pass@<k>_tasks``
    (the tasks with at least k samples) of one group, for every k of ``ks`` (module docstring)."""
    out: dict[str, float | int | None] = {}
    for k in ks:
        vals = g[f"pass@{k}"].drop_nulls()
        out[f"pass@{k}"] = float(vals.mean()) if vals.len() else None
        out[f"pass@{k}_tasks"] = vals.len()
    return out


def _group_row(
    by: Sequence[str],
    group_key: tuple,
    g: pl.DataFrame,
    rate_cols: Sequence[str],
    ks: Sequence[int],
    n_boot: int,
    seed: int,
) -> dict:
    """One :func:`summary` row (a dict) for the group ``group_key`` of ``by`` with per-task rows ``g``.

    ``no_native_tasks`` lists the group's tasks under the no-native rule (module docstring), sorted.
    """
    row = dict(zip(by, group_key))
    row.update(_group_counts(g))
    row.update(_group_rates(g, rate_cols, n_boot, seed))
    row["geomean_speedup"] = _group_geomean(g)
    row.update(_group_pass_at_k(g, ks))
    row["no_native_tasks"] = sorted(g.filter(pl.col("no_native"))["task_id"].to_list())
    return row


def _summary_schema(
    pt: pl.DataFrame, by: Sequence[str], rate_cols: Sequence[str], ks: Sequence[int]
) -> dict[str, pl.DataType]:
    """The column → dtype of a :func:`summary` frame, in output order.

    ``by`` columns keep their :func:`per_task` dtype; counts u32; rates, CIs, ``geomean_speedup`` and
    ``pass@<k>`` f64; ``pass@<k>_tasks`` u32; ``no_native_tasks`` list[str].
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
    schema["no_native_tasks"] = pl.List(pl.String)
    # order columns: keys, counts, then each rate next to its CI
    ordered = [*by, *_COUNT_COLUMNS]
    for c in rate_cols:
        ordered += [c, f"{c}_ci_low", f"{c}_ci_high"]
    ordered += [
        "geomean_speedup",
        *[x for k in ks for x in (f"pass@{k}", f"pass@{k}_tasks")],
        "no_native_tasks",
    ]
    return {c: schema[c] for c in ordered}


def summary(
    records: pl.DataFrame | pl.LazyFrame,
    tasks: pl.DataFrame | Iterable,
    ps: Sequence[float] = DEFAULT_PS,
    by: Sequence[str] = ("method",),
    ks: Sequence[int] = DEFAULT_KS,
    n_boot: int = 1000,
    seed: int = 0,
) -> pl.DataFrame:
    """Metrics per group (see the module docstring for the definitions).

    Args:
        records, tasks: as for :func:`per_task`.
        ps: thresholds p of fast_p.
        by: grouping columns; ``category`` and ``split`` come from the task table, the others identify a
            system and come from the records (e.g. ``("method",)``, ``("method", "category")``,
            ``("run", "method")``).
        ks: k values of pass@k.
        n_boot: bootstrap resamples for the CIs; ``seed`` seeds them.

    Returns:
        One row per group, sorted by ``by``: ``by`` columns; ``n_tasks``, ``n_missing`` (tasks without
        any record), ``n_compiled``, ``n_correct``, ``n_with_speedup``, ``n_no_native``, ``n_emulated``
        (u32); ``csr``, ``fcr``, ``fast_<p>``, ``fast_sig_<p>`` (f64 fractions) each with ``_ci_low`` and
        ``_ci_high``; ``geomean_speedup`` (f64, null if no task has a speedup); ``pass@<k>`` (f64, null
        if no task has k samples) and ``pass@<k>_tasks`` (u32); ``no_native_tasks`` (list[str]).
    """
    by = list(by)
    keys = [c for c in by if c not in TASK_COLUMNS]
    if not keys:
        raise MetricsError(f"by={by}: add a record column that identifies a system, e.g. 'method'")
    pt, rate_cols = _with_rate_indicators(per_task(records, tasks, keys), ps)
    pt = _with_pass_at_k(pt, ks)
    rows = [
        _group_row(by, group_key, g, rate_cols, ks, n_boot, seed)
        for group_key, g in pt.group_by(by, maintain_order=False)
    ]
    df = pl.DataFrame(rows, schema=_summary_schema(pt, by, rate_cols, ks), orient="row")
    return df.sort(by)
