"""The verdict of ``mkb reproduce``: what ran where (environment), per task and per metric (rich tables), the
real differences by name, and ``verdict.json`` beside the reproduced run's records."""

from __future__ import annotations

import json
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kit.bundle.compare import DIFFERENT, NOISE, SAME, BundleComparison
from kit.results.rules import Speedup

VERDICT_FILE = "verdict.json"
_STYLE = {SAME: "green", NOISE: "yellow", DIFFERENT: "bold red"}


def _cell(verdict: str) -> str:
    style = _STYLE.get(verdict)
    return f"[{style}]{verdict}[/{style}]" if style else verdict


def _speedup(sp: Speedup | None) -> str:
    return "-" if sp is None else sp.text()


def _value(v: Any) -> str:
    if v is None:
        return "-"
    return f"{100 * v:.1f}%" if isinstance(v, float) else str(v)


def environment_table(rows: list[dict[str, Any]]) -> Table:
    """``rows``: ``key``, ``bundle``, ``reproduced``, ``verdict`` (:func:`kit.bundle.reproduce.environment_rows`)."""
    table = Table(title="environment (bundle vs this reproduction)")
    for col in ("what", "bundle", "reproduction", "verdict"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r["key"], escape(str(r["bundle"])), escape(str(r["reproduced"])), _cell(r["verdict"]))
    return table


def task_table(cmp: BundleComparison) -> Table:
    table = Table(title="per task (compile and correctness per candidate, best usable speedup, fast_p)")
    for col in ("method", "task", "samples", "compile", "correct", "speedup: bundle", "reproduction", "speedups",
                "fast_p"):
        table.add_column(col, overflow="fold")
    for r in cmp.tasks:
        table.add_row(escape(r["method"]), escape(r["task_id"]), str(r["samples"]), _cell(r["compile"]),
                      _cell(r["correct"]), escape(_speedup(r["best_bundle"])), escape(_speedup(r["best_reproduced"])),
                      _cell(r["speedup"]),
                      _cell(r["fast_p"]))
    return table


def metric_table(cmp: BundleComparison) -> Table:
    table = Table(title="per metric (over the bundle's tasks)")
    for col in ("method", "metric", "bundle", "reproduction", "verdict"):
        table.add_column(col)
    for r in cmp.metrics:
        table.add_row(r["method"], r["metric"], _value(r["bundle"]), _value(r["reproduced"]), _cell(r["verdict"]))
    return table


def summary_line(cmp: BundleComparison) -> str:
    where = ("same hardware: compile, correctness, speedups and fast_p compared" if cmp.same_hardware else
             "other hardware: only compile and correctness must match (speedups and fast_p not compared)")
    if cmp.matches:
        noisy = sum(r["verdict"] == NOISE for r in cmp.metrics)
        return f"verdict: reproduced ({where}{f'; {noisy} metric(s) within noise' if noisy else ''})"
    return f"verdict: DIFFERENT, {len(cmp.differences)} real difference(s) ({where})"


def print_verdict(cmp: BundleComparison, env: list[dict[str, Any]], console: Console | None = None) -> None:
    """Print the three tables, every real difference by name, and the summary line."""
    console = console or Console(width=200)
    console.print(environment_table(env))
    console.print(task_table(cmp))
    console.print(metric_table(cmp))
    for used in cmp.taus_used():  # the speedups of two runs are compared with it: say which and from where
        console.print(f"speedups compared across runs with {escape(used)}", highlight=False)
    if (power := cmp.detectable()) is not None:  # what these comparisons could have told apart
        console.print(escape(power), highlight=False)
    for d in cmp.differences:
        console.print(f"[bold red]different[/bold red]: {escape(d)}", highlight=False)
    console.print(summary_line(cmp), highlight=False)


def _plain(v: Any) -> Any:
    if is_dataclass(v):
        return asdict(v)
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def write_verdict(cmp: BundleComparison, env: list[dict[str, Any]], run_dir: Path) -> Path:
    """``run_dir/verdict.json``: ``matches``, ``same_hardware``, ``differences``, ``environment``, ``between_run``
    (:meth:`kit.bundle.compare.BundleComparison.taus_used`), ``detectable`` (its sentence on a 20 % change),
    ``metrics``, ``tasks`` and ``candidates`` (speedups as ``{"value", "low", "high"}``)."""
    path = run_dir / VERDICT_FILE
    data = {"matches": cmp.matches, "same_hardware": cmp.same_hardware, "differences": cmp.differences,
            "environment": env, "between_run": cmp.taus_used(), "detectable": cmp.detectable(),
            "metrics": cmp.metrics, "tasks": _plain(cmp.tasks), "candidates": _plain(cmp.candidates)}
    path.write_text(json.dumps(data, indent=1, default=str) + "\n")
    return path
