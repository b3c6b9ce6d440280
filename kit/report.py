"""Reports of one or more runs: self-contained HTML, Markdown, JSON and CSV, with plots.

``build_report([run_a, run_b], out_dir, tasks)`` reads each run's records (its shards, or
``results.parquet`` when it has no shards), computes :func:`kit.metrics.summary` per run and labels every
method with its run (``<run>/<method>`` when there are several runs), and writes into ``out_dir``:

- ``report.html``: everything below, plots embedded as base64 PNG (no external file needed);
- ``report.md``: the same tables, plots linked from ``plots/*.png``;
- ``report.json``: the summary rows (same numbers as :func:`kit.metrics.summary`), per category rows,
  failures, compile errors, provenance, calibration;
- ``summary.csv``: one row per run, method (, split) and category (``category == "all"`` for the overall row).

Sections: headline table (paper Table 4/5: CSR, FCR, fast_p with bootstrap 95 % CIs), stage funnel (Fig. 3),
per-category CSR/FCR/fast_1.0 (Fig. 4/5), speedup distribution with the noise floor band, failure breakdown by
status and error kind, the most common compile errors, run provenance.

Denominator: the tasks of ``tasks`` whose split has at least one record in the runs (so ``mkb report`` given
the whole suite scores a test-split run against the test split); with several such splits each gets its rows.

Input files of a run directory (all optional except the records):

- ``provenance.json``: an object with the keys :data:`PROVENANCE_KEYS` (``config_digest``, ``mnn_version``,
  ``compiler``, ``cpu_model``, ``threads``, ...); a missing key shows as ``unknown``.
- ``calibration.json``: the native A/A calibration written by ``mkb calibrate``:
  ``{"summary": {"aa_speedup_p05": f, "aa_speedup_p95": f, "aa_speedup_median": f, ...}, "tasks": [...]}``;
  or ``calibration.parquet`` with a ``speedup`` column (one A/A speedup per row), whose 5th–95th percentiles
  are used.  Without either, the ``native`` method's own speedups in the run (the A/A method) give the band.
  The band [p05, p95] is drawn as the noise floor on the speedup plots.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import polars as pl

from kit import metrics, provenance, shards
from kit.records import Status

REPORT_SCHEMA_VERSION = 1
PROVENANCE_KEYS: tuple[str, ...] = (
    "config_digest",
    "mnn_version",
    "mnn_tree_digest",
    "engine",
    "compiler",
    "cpu_model",
    "arch",
    "threads",
    "precision",
    "python",
    "started_at",
)
HEADLINE_PS: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0)
FUNNEL: tuple[tuple[str, str], ...] = (
    ("compile", "csr"),
    ("correct", "fcr"),
    ("fast_0.5", "fast_0.5"),
    ("fast_1.0", "fast_1.0"),
    ("fast_1.5", "fast_1.5"),
)
TOP_ERRORS = 15


class ReportError(Exception):
    """A run directory has no records, or an input file of a run is malformed (names the file)."""


@dataclass(frozen=True)
class ReportPaths:
    html: Path
    markdown: Path
    json: Path
    csv: Path
    plots: dict[str, Path]


@dataclass(frozen=True)
class Run:
    label: str
    dir: Path
    records: pl.DataFrame
    provenance: dict[str, str]
    calibration: dict[str, Any] | None
    tasks: pl.DataFrame
    """the run's denominator (:func:`run_tasks`)"""
    selected: bool
    """the denominator is a tasks.ids selection rather than whole splits"""


# ---------------------------------------------------------------------------------------------- inputs


def load_records(run_dir: Path) -> pl.DataFrame:
    """Deduplicated records of ``run_dir`` (shards, else ``results.parquet``).

    Raises:
        ReportError: neither exists.
    """
    if shards.shard_paths(run_dir):
        return shards.read_records(run_dir)
    merged = run_dir / shards.RESULTS_FILE
    if merged.is_file():
        try:
            return shards.read_files([merged])
        except shards.ShardError as exc:
            raise ReportError(str(exc)) from exc
    raise ReportError(
        f"{run_dir}: no records (no {shards.SHARDS_DIR}/*.parquet and no {shards.RESULTS_FILE})"
    )


def run_tasks(run_dir: Path, records: pl.DataFrame, task_table: pl.DataFrame) -> tuple[pl.DataFrame, bool]:
    """The tasks ``run_dir``'s records are scored against (its denominator), as ``mkb eval`` scored them:
    the task selection (``tasks.split``, ``tasks.ids``) of each of its sessions, from ``provenance.json``
    (:func:`kit.provenance.task_selections`; several sessions: their union).  A run without that record
    (an older kit, no file) is scored against every task of each split its records touch.  Returns those
    rows of ``task_table`` and whether every session chose its tasks by ``tasks.ids``.

    Raises:
        ReportError: the selection names tasks ``task_table`` lacks, or nothing is left (wrong tasks folder).
    """
    try:
        selections = provenance.task_selections(provenance.load(run_dir))
    except provenance.ProvenanceError as exc:
        raise ReportError(str(exc)) from exc
    if selections is None:
        used = task_table.filter(pl.col("task_id").is_in(records["task_id"].unique().implode()))["split"].unique()
        out, by_ids = task_table.filter(pl.col("split").is_in(used.implode())), False
    else:
        known = set(task_table["task_id"].to_list())
        missing = sorted({i for sel in selections for i in sel["ids"]} - known)
        if missing:
            raise ReportError(f"tasks: {run_dir} was evaluated on task ids the task table lacks "
                              f"({', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}); wrong tasks directory?")
        keep = pl.lit(False)
        for sel in selections:
            one = pl.lit(True) if sel["split"] == "all" else pl.col("split") == sel["split"]
            if sel["ids"]:
                one = one & pl.col("task_id").is_in(sel["ids"])
            keep = keep | one
        out, by_ids = task_table.filter(keep), all(sel["ids"] for sel in selections)
    if out.height == 0:
        raise ReportError(
            f"tasks: none of the {records['task_id'].n_unique()} task ids in the records of {run_dir} is in the "
            f"task table ({task_table.height} tasks); wrong tasks directory?"
        )
    return out, by_ids


def load_provenance(run_dir: Path) -> dict[str, str]:
    """``run_dir/provenance.json`` as strings for :data:`PROVENANCE_KEYS` (``unknown`` when missing; a key
    that differed between the run's sessions shows every session's value, ``a | b (differs between
    sessions)``, see :mod:`kit.provenance`).

    Raises:
        ReportError: the file is not a JSON object.
    """
    try:
        data = provenance.load(run_dir) or {}
    except provenance.ProvenanceError as exc:
        raise ReportError(str(exc)) from exc
    out = {k: "unknown" if data.get(k) in (None, "") else str(data[k]) for k in PROVENANCE_KEYS}
    for k, values in data.get("differs", {}).items():  # an object: checked by provenance.load
        if k in out and isinstance(values, list):
            out[k] = " | ".join(dict.fromkeys(str(v) for v in values if v is not None)) + " (differs between sessions)"
    return out


def load_calibration(run_dir: Path, records: pl.DataFrame) -> dict[str, Any] | None:
    """Noise floor band ``{"low", "high", "median", "source"}`` of A/A speedups, or None (module docstring).

    Raises:
        ReportError: a calibration file lacks the fields it needs.
    """
    js, pq = run_dir / "calibration.json", run_dir / "calibration.parquet"
    if js.is_file():
        try:
            summ = json.loads(js.read_text(encoding="utf-8"))["summary"]
            low, high = summ["aa_speedup_p05"], summ["aa_speedup_p95"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ReportError(
                f"{js}: expected {{'summary': {{'aa_speedup_p05', 'aa_speedup_p95'}}}}: {exc!r}"
            ) from exc
        if low is None or high is None:
            return None
        return {
            "low": float(low),
            "high": float(high),
            "median": summ.get("aa_speedup_median"),
            "source": js.name,
        }
    if pq.is_file():
        df = pl.read_parquet(pq)
        if "speedup" not in df.columns:
            raise ReportError(f"{pq}: missing column 'speedup'")
        s = df["speedup"].drop_nulls().to_numpy()
        return _band(s, pq.name)
    native = records.filter(
        (pl.col("method") == "native") & pl.col("status").is_in(metrics._CORRECT) & ~pl.col("timing_emulated")
    )["speedup"].drop_nulls()
    return _band(native.to_numpy(), "native method in this run")


def _band(s: np.ndarray, source: str) -> dict[str, Any] | None:
    if s.size == 0:
        return None
    return {
        "low": float(np.percentile(s, 5)),
        "high": float(np.percentile(s, 95)),
        "median": float(np.median(s)),
        "source": source,
    }


def _labels(run_dirs: list[Path]) -> list[str]:
    labels: list[str] = []
    for d in run_dirs:
        name = d.resolve().name or "run"
        label, i = name, 2
        while label in labels:
            label, i = f"{name}#{i}", i + 1
        labels.append(label)
    return labels


# ---------------------------------------------------------------------------------------------- tables


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
            *((f"{metrics.fast_col(p)} %", metrics.fast_col(p)) for p in ps),
        ):
            row[name] = _fmt_rate(r[col], r[f"{col}_ci_low"], r[f"{col}_ci_high"])
        g = r["geomean_speedup"]
        sig = metrics.fast_sig_col(1.0)
        if sig in r:
            row["fast_sig_1.0 %"] = _fmt_rate(r[sig], r[f"{sig}_ci_low"], r[f"{sig}_ci_high"])
        row["geomean speedup"] = "n/a" if g is None else f"{g:.3f}"
        row["no native"] = str(r["n_no_native"])
        row["emulated"] = str(r["n_emulated"])
        out.append(row)
    return pl.DataFrame(out, schema=list(out[0]) if out else ["system"])


def category_table(by_cat: pl.DataFrame, categories: list[str]) -> pl.DataFrame:
    """Display table: one row per category (in ``categories`` order), one column per system holding
    ``"CSR / FCR / fast_1.0"`` in percent."""
    if by_cat.height == 0:
        return pl.DataFrame(schema={"category": pl.String})
    cell = pl.format(
        "{} / {} / {}", *[pl.col(c).mul(100).round(1).cast(pl.String) for c in ("csr", "fcr", "fast_1.0")]
    )
    order = {c: i for i, c in enumerate(categories)}
    wide = (
        by_cat.select("system", "category", "n_tasks", cell.alias("cell"))
        .pivot(on="system", index=["category", "n_tasks"], values="cell")
        .sort(pl.col("category").replace_strict(order, default=len(order)))
        .rename({"n_tasks": "tasks"})
    )
    return wide


# ---------------------------------------------------------------------------------------------- plots


STATUS_COLORS: dict[str, str] = {
    Status.OK.value: "#2ca02c",
    Status.TIMING_FAILED.value: "#98df8a",
    Status.VERIFY_MISMATCH.value: "#ff7f0e",
    Status.RUNTIME_CRASH.value: "#9467bd",
    Status.RUNTIME_TIMEOUT.value: "#c5b0d5",
    Status.COMPILE_ERROR.value: "#d62728",
    Status.COMPILE_TIMEOUT.value: "#ff9896",
    Status.REJECTED_INPUT.value: "#8c564b",
    Status.WORKER_LOST.value: "#7f7f7f",
    Status.HARNESS_ERROR.value: "#bcbd22",
}
_NICE_TICKS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 20, 50, 100)


def _png(fig: plt.Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def _no_data(ax: plt.Axes, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what}", ha="center", va="center", transform=ax.transAxes, color="gray")
    ax.set_xticks([])
    ax.set_yticks([])


def _grouped_bars(ax: plt.Axes, groups: list[str], series: dict[str, list[float]], ylabel: str) -> None:
    n = max(len(series), 1)
    width = 0.8 / n
    x = np.arange(len(groups))
    colors = plt.get_cmap("tab10")
    for i, (name, vals) in enumerate(series.items()):
        bars = ax.bar(
            x + (i - (n - 1) / 2) * width, [100 * v for v in vals], width, label=name, color=colors(i % 10)
        )
        if len(groups) * n <= 30:
            ax.bar_label(bars, fmt="%.0f", fontsize=7, padding=1)
    ax.set_xticks(
        x, groups, rotation=30 if len(groups) > 5 else 0, ha="right" if len(groups) > 5 else "center"
    )
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 105)
    ax.grid(axis="y", alpha=0.3)


def plot_funnel(summary: pl.DataFrame) -> bytes:
    """Stage funnel (paper Fig. 3): compile → correct → fast_0.5 → fast_1.0 → fast_1.5, % of tasks per system."""
    fig, ax = plt.subplots(figsize=(9, 4.5), layout="constrained")
    if summary.height == 0:
        _no_data(ax, "records")
    else:
        series = {r["system"]: [r[c] for _, c in FUNNEL] for r in summary.iter_rows(named=True)}
        _grouped_bars(ax, [s for s, _ in FUNNEL], series, "% of tasks")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_title("Stage funnel: share of tasks passing each stage")
    return _png(fig)


def plot_categories(by_cat: pl.DataFrame, categories: list[str]) -> bytes:
    """Per-category CSR, FCR and fast_1.0 (paper Fig. 4/5): one panel per metric, bars per system."""
    fig, axes = plt.subplots(3, 1, figsize=(11, 10), sharex=True, layout="constrained")
    systems = by_cat["system"].unique(maintain_order=True).to_list() if by_cat.height else []
    for ax, (title, col) in zip(axes, (("CSR", "csr"), ("FCR", "fcr"), ("fast_1.0", "fast_1.0"))):
        if not systems:
            _no_data(ax, "records")
            continue
        series = {}
        for s in systems:
            sub = {r["category"]: r[col] for r in by_cat.filter(pl.col("system") == s).iter_rows(named=True)}
            series[s] = [sub.get(c, 0.0) or 0.0 for c in categories]
        _grouped_bars(ax, categories, series, f"{title} %")
        ax.set_title(f"{title} by category")
    if systems:
        fig.legend(
            *axes[0].get_legend_handles_labels(),
            loc="outside upper center",
            ncol=min(len(systems), 4),
            fontsize=9,
        )
    return _png(fig)


def plot_speedups(per_task: pl.DataFrame, calibration: dict[str, Any] | None) -> bytes:
    """Best speedup per correct task: histogram (log bins) and ECDF (log x), noise floor band, 1× line."""
    fig, (ax_h, ax_e) = plt.subplots(1, 2, figsize=(12, 4.8), layout="constrained")
    data = {
        s: per_task.filter(pl.col("system") == s)["speedup"].drop_nulls().to_numpy()
        for s in per_task["system"].unique(maintain_order=True).to_list()
    }
    data = {s: v[v > 0] for s, v in data.items() if (v > 0).any()}
    if not data:
        _no_data(ax_h, "speedups")
        _no_data(ax_e, "speedups")
        return _png(fig)
    allv = np.concatenate(list(data.values()))
    lo, hi = float(allv.min()), float(allv.max())
    if calibration:
        lo, hi = min(lo, calibration["low"]), max(hi, calibration["high"])
    lo, hi = lo / 1.2, hi * 1.2
    bins = np.geomspace(lo, hi, 30)
    colors = plt.get_cmap("tab10")
    for i, (s, v) in enumerate(data.items()):
        ax_h.hist(
            v, bins=bins, histtype="step", linewidth=1.6, label=f"{s} (n={v.size})", color=colors(i % 10)
        )
        xs = np.sort(v)
        ax_e.step(xs, np.arange(1, xs.size + 1) / xs.size, where="post", label=s, color=colors(i % 10))
    for ax in (ax_h, ax_e):
        ax.set_xscale("log")
        ax.axvline(1.0, color="black", linestyle="--", linewidth=0.8)
        if calibration:
            ax.axvspan(
                calibration["low"], calibration["high"], color="gray", alpha=0.25, label="A/A noise (p05–p95)"
            )
        ax.set_xlabel("speedup over native MNN (×, log scale)")
        ax.set_xlim(lo, hi)
        ticks = [t for t in _NICE_TICKS if lo <= t <= hi]
        ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}×"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.grid(alpha=0.3)
    ax_h.set_ylabel("tasks")
    ax_h.set_title("Best speedup per correct task")
    ax_e.set_ylabel("fraction of timed tasks ≤ x")
    ax_e.set_title("ECDF of speedups")
    ax_h.legend(fontsize=8)
    return _png(fig)


def plot_failures(fail: pl.DataFrame) -> bytes:
    """Stacked horizontal bars: share of samples per status, per system."""
    systems = fail["system"].unique(maintain_order=True).to_list()
    fig, ax = plt.subplots(figsize=(10, 1.4 + 0.5 * max(len(systems), 1)), layout="constrained")
    if not systems:
        _no_data(ax, "records")
        return _png(fig)
    left = np.zeros(len(systems))
    for status in (s.value for s in Status):
        sub = fail.filter(pl.col("status") == status).group_by("system").agg(pl.col("share").sum())
        m = dict(zip(sub["system"], sub["share"]))
        vals = np.array([m.get(s, 0.0) for s in systems])
        if vals.sum() == 0:
            continue
        ax.barh(systems, 100 * vals, left=left, label=status, color=STATUS_COLORS.get(status, "#17becf"))
        left += 100 * vals
    ax.set_xlabel("% of samples")
    ax.set_xlim(0, 100)
    ax.invert_yaxis()
    ax.legend(fontsize=8, bbox_to_anchor=(1.01, 1), loc="upper left")
    ax.set_title("Outcome of every sample by status")
    return _png(fig)


# ---------------------------------------------------------------------------------------------- rendering


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return "n/a" if math.isnan(v) else f"{v:.4g}"
    if isinstance(v, list):
        return ", ".join(map(str, v))
    return str(v)


def _html_table(df: pl.DataFrame, cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in df.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row) + "</tr>" for row in df.iter_rows()
    )
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _md_table(df: pl.DataFrame) -> str:
    def esc(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(esc(c) for c in df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(esc(_cell(v)) for v in row) + " |" for row in df.iter_rows()]
    return "\n".join(lines)


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    return v


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:0.9em}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f2f2f2} tr:nth-child(even) td{background:#fafafa}
img{max-width:100%;border:1px solid #eee;margin:0.5em 0}
.note{color:#555;font-size:0.9em} code{background:#f4f4f4;padding:0 3px}
"""


def _check_writable(out_dir: Path) -> None:
    """Raises ReportError when the report cannot be written into ``out_dir`` (before any work is done)."""
    try:
        (out_dir / "plots").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"cannot write the report into {out_dir}: {exc.strerror}; pass --out DIR") from exc
    for d in (out_dir, out_dir / "plots"):
        if not os.access(d, os.W_OK | os.X_OK):
            raise ReportError(f"cannot write the report into {d}: not writable; pass --out DIR")


def build_report(
    run_dirs: list[Path],
    out_dir: Path,
    tasks: pl.DataFrame | list,
    ps: tuple[float, ...] = HEADLINE_PS,
    n_boot: int = 1000,
    seed: int = 0,
) -> ReportPaths:
    """Write the report of ``run_dirs`` into ``out_dir`` (see the module docstring); return the paths.

    Args:
        run_dirs: one or more run directories; several are compared side by side, methods labelled by run.
        out_dir: created if missing; existing report files are overwritten.
        tasks: the task table (``task_id``, ``category``, ``split``) or a list of :class:`kit.tasks.Task`.
        ps: fast_p thresholds of the headline table (the funnel and category plots add 0.5, 1.0, 1.5).
        n_boot, seed: bootstrap of the CIs (:func:`kit.metrics.summary`).

    Raises:
        ReportError: no run directories, a run without records, records of no task in ``tasks``, or a
            malformed run input file.
        kit.metrics.MetricsError: records unusable for metrics.
    """
    if not run_dirs:
        raise ReportError("run_dirs: give at least one run directory")
    run_dirs = [Path(d) for d in run_dirs]
    out_dir = Path(out_dir)
    full_table = metrics.as_task_table(tasks)
    labels = _labels(run_dirs)
    multi = len(run_dirs) > 1
    runs: list[Run] = []
    for label, d in zip(labels, run_dirs):
        recs = load_records(d)
        system = (pl.lit(f"{label}/") + pl.col("method")) if multi else pl.col("method")
        recs = recs.with_columns(run=pl.lit(label), system=system)
        runs.append(Run(label, d, recs, load_provenance(d), load_calibration(d, recs), *run_tasks(d, recs, full_table)))
    _check_writable(out_dir)  # after the inputs are known good: a refused report leaves no folder behind

    all_ps = tuple(sorted(set(ps) | {0.5, 1.0, 1.5}))
    records = pl.concat([r.records for r in runs], how="diagonal_relaxed")
    task_table = pl.concat([r.tasks for r in runs]).unique(subset="task_id", keep="first").sort("task_id")
    used = task_table["split"].unique().sort()
    split_key = ["split"] if used.len() > 1 else []
    categories = _category_order(task_table)

    # metrics per run (so a task without native baseline in one run does not affect another run)
    summ_parts, cat_parts, pt_parts = [], [], []
    for r in runs:
        s = metrics.summary(
            r.records,
            r.tasks,
            ps=all_ps,
            by=("run", "method", "system", *split_key),
            n_boot=n_boot,
            seed=seed,
        )
        c = metrics.summary(
            r.records,
            r.tasks,
            ps=all_ps,
            by=("run", "method", "system", *split_key, "category"),
            n_boot=n_boot,
            seed=seed,
        )
        summ_parts.append(s)
        cat_parts.append(c)
        pt_parts.append(metrics.per_task(r.records, r.tasks, keys=("run", "method", "system")))
    summary = pl.concat(summ_parts, how="vertical").sort(["run", "method", *split_key])
    by_cat = pl.concat(cat_parts, how="vertical").sort(["run", "method", *split_key, "category"])
    per_task = pl.concat(pt_parts, how="vertical")
    if split_key:  # plots label each system with its split

        def relabel(df: pl.DataFrame) -> pl.DataFrame:
            return df.with_columns(system=pl.col("system") + " [" + pl.col("split") + "]")
    else:

        def relabel(df: pl.DataFrame) -> pl.DataFrame:
            return df

    fail = failures(records)
    errors = compile_errors(records)
    calibration = next((r.calibration for r in runs if r.calibration), None)

    plots_png = {
        "funnel": plot_funnel(relabel(summary)),
        "categories": plot_categories(relabel(by_cat), categories),
        "speedups": plot_speedups(relabel(per_task), calibration),
        "failures": plot_failures(fail),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    plot_dir = out_dir / "plots"
    plot_dir.mkdir(exist_ok=True)
    plot_paths = {}
    for name, png in plots_png.items():
        plot_paths[name] = plot_dir / f"{name}.png"
        plot_paths[name].write_bytes(png)

    head = headline_table(summary, ps)
    cat_table = category_table(relabel(by_cat), categories)
    prov = pl.DataFrame(
        {"key": list(PROVENANCE_KEYS), **{r.label: [r.provenance[k] for k in PROVENANCE_KEYS] for r in runs}}
    )
    status_order = {s.value: i for i, s in enumerate(Status)}
    status_table = (
        fail.group_by("system", "status")
        .agg(pl.col("count").sum())
        .sort("system")
        .pivot(on="system", index="status", values="count")
        .fill_null(0)
        .sort(pl.col("status").replace_strict(status_order, default=len(status_order)))
    )
    kind_table = fail.filter(pl.col("status") != Status.OK.value).select(
        "system", "status", "error_kind", "count", pl.col("share").mul(100).round(1).alias("% of samples")
    )
    no_native = summary.select(
        "system", pl.col("no_native_tasks").list.join(", ").alias("tasks without native baseline")
    ).filter(pl.col("tasks without native baseline") != "")
    cal_text = (
        "no calibration (no calibration.json/.parquet and no native method in the runs)"
        if calibration is None
        else f"A/A noise floor (native vs native speedup, p05–p95): {calibration['low']:.3f}–{calibration['high']:.3f}× "
        f"from {calibration['source']}"
    )
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    def denominator(r: Run) -> str:
        text = ", ".join(f"{s}: {n} tasks" for s, n in r.tasks.group_by("split").len().sort("split").iter_rows())
        return text + (" selected by tasks.ids" if r.selected else "")

    denoms = {denominator(r) for r in runs}
    denom = denoms.pop() if len(denoms) == 1 else "; ".join(f"{r.label}: {denominator(r)}" for r in runs)
    intro = (
        f"Runs: {', '.join(f'{r.label} ({r.dir})' for r in runs)}. Denominator: all tasks of the split, or of "
        f"the run's tasks.ids selection ({denom}); "
        "a task without a record counts as a failure. Rates in %, 95 % bootstrap CI over tasks in brackets. "
        "Best of the samples per task. fast_p counts correct tasks with speedup > p; tasks without a native "
        "baseline and timings under emulation never count as fast."
    )

    sections: list[tuple[str, str, str]] = []  # (title, html, markdown)

    def add(title: str, df: pl.DataFrame | None = None, plot: str | None = None, note: str = "") -> None:
        h, m = "", ""
        if note:
            h += f'<p class="note">{html.escape(note)}</p>'
            m += note + "\n\n"
        if df is not None:
            if df.height:
                h += _html_table(df)
                m += _md_table(df) + "\n\n"
            else:
                h += '<p class="note">none</p>'
                m += "none\n\n"
        if plot is not None:
            b64 = base64.b64encode(plots_png[plot]).decode("ascii")
            h += f'<img alt="{plot}" src="data:image/png;base64,{b64}">'
            m += f"![{plot}](plots/{plot}.png)\n\n"
        sections.append((title, h, m))

    add("Headline", head, note=intro)
    add(
        "Stage funnel",
        plot="funnel",
        note="Share of all tasks that compile, are correct, and are faster than 0.5×, 1×, 1.5× native.",
    )
    add(
        "Per category",
        cat_table,
        plot="categories",
        note="Each cell: CSR / FCR / fast_1.0 in % of the category's tasks.",
    )
    add("Speedup distribution", plot="speedups", note=cal_text)
    add("Tasks without a native baseline", no_native)
    add("Outcomes by status (samples)", status_table, plot="failures")
    add("Failures by error kind (samples)", kind_table)
    add(
        "Most common compile errors",
        errors,
        note="First error diagnostic of each compile_error sample, normalized (names and numbers masked).",
    )
    add("Provenance", prov)

    title = "MobileKernelBench report"
    body = "".join(f"<h2>{html.escape(t)}</h2>{h}" for t, h, _ in sections)
    html_text = (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title}</title><style>{_CSS}</style></head>'
        f'<body><h1>{title}</h1><p class="note">generated {generated}</p>{body}</body></html>'
    )
    md_text = f"# {title}\n\ngenerated {generated}\n\n" + "".join(f"## {t}\n\n{m}" for t, _, m in sections)

    csv_df = pl.concat(
        [summary.with_columns(category=pl.lit("all")), by_cat], how="diagonal_relaxed"
    ).with_columns(pl.col("no_native_tasks").list.join(";"))
    report_json = {
        "report_schema_version": REPORT_SCHEMA_VERSION,
        "generated_at": generated,
        "ps": list(ps),
        "n_boot": n_boot,
        "seed": seed,
        "runs": [
            {
                "label": r.label,
                "dir": str(r.dir),
                "provenance": r.provenance,
                "calibration": r.calibration,
                "records": r.records.height,
            }
            for r in runs
        ],
        "splits": used.to_list(),
        "summary": summary.to_dicts(),
        "by_category": by_cat.to_dicts(),
        "failures": fail.to_dicts(),
        "compile_errors": errors.to_dicts(),
    }
    paths = ReportPaths(
        html=out_dir / "report.html",
        markdown=out_dir / "report.md",
        json=out_dir / "report.json",
        csv=out_dir / "summary.csv",
        plots=plot_paths,
    )
    paths.html.write_text(html_text, encoding="utf-8")
    paths.markdown.write_text(md_text, encoding="utf-8")
    paths.json.write_text(json.dumps(_jsonable(report_json), indent=1), encoding="utf-8")
    csv_df.write_csv(paths.csv)
    return paths


def _category_order(task_table: pl.DataFrame) -> list[str]:
    from kit.tasks import CATEGORIES

    present = set(task_table["category"].to_list())
    return [c for c in CATEGORIES if c in present] + sorted(present - set(CATEGORIES))
