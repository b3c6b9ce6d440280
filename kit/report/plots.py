"""The report's figures as PNG bytes (matplotlib, Agg backend): stage funnel (paper Fig. 3), per-category
CSR/FCR/fast_1.0 (Fig. 4/5), speedup distribution with the noise floor band, outcomes by status."""

from __future__ import annotations

import io
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import polars as pl

from kit.results.records import Status

FUNNEL: tuple[tuple[str, str], ...] = (
    ("compile", "csr"),
    ("correct", "fcr"),
    ("fast_0.5", "fast_0.5"),
    ("fast_1.0", "fast_1.0"),
    ("fast_1.5", "fast_1.5"),
)
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
    """Best speedup per correct task: histogram (log bins) and ECDF (log x), noise floor band, 1× line; on the
    ECDF a hollow circle marks a speedup inside its task's A/A noise band (``inside_noise``)."""
    fig, (ax_h, ax_e) = plt.subplots(1, 2, figsize=(12, 4.8), layout="constrained")
    timed = per_task.filter(pl.col("speedup") > 0)
    inside = pl.col("inside_noise").fill_null(False) if "inside_noise" in per_task.columns else pl.lit(False)
    data: dict[str, np.ndarray] = {}
    noisy: dict[str, np.ndarray] = {}
    for s in timed["system"].unique(maintain_order=True).to_list():
        sub = timed.filter(pl.col("system") == s).select("speedup", inside.alias("inside")).sort("speedup")
        data[s], noisy[s] = sub["speedup"].to_numpy(), sub["inside"].to_numpy()
    if calibration and calibration.get("low") is None:
        calibration = None  # per-task figures only: no band to draw
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
        ys = np.arange(1, v.size + 1) / v.size
        ax_e.step(v, ys, where="post", label=s, color=colors(i % 10))
        if noisy[s].any():
            ax_e.scatter(v[noisy[s]], ys[noisy[s]], s=22, facecolors="none", edgecolors=colors(i % 10),
                         label=f"{s}: inside its task's A/A noise")
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
    if any(n.any() for n in noisy.values()):
        ax_e.legend(fontsize=8)
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


def plot_turns(turns: pl.DataFrame) -> bytes:
    """CSR, FCR and fast_1.0 (% of tasks) by refinement turn, one line per run and method and metric."""
    fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
    if turns.height == 0:
        _no_data(ax, "refined methods")
    else:
        for (run, method), part in turns.group_by(["run", "method"], maintain_order=True):
            for col, style in (("csr", ":"), ("fcr", "--"), ("fast_1.0", "-")):
                ax.plot(part["turn"].to_list(), part[col].to_list(), style, marker="o", label=f"{run} {method} {col}")
        ax.set_xlabel("turn")
        ax.set_ylabel("% of tasks")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_title("Refinement: best of turns 1..T")
    return _png(fig)
