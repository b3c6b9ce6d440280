"""Writing a report of one or more runs into a folder (:func:`build_report`).

``build_report([run_a, run_b], out_dir, tasks)`` reads each run's records (its shards, or
``results.parquet`` when it has no shards), computes :func:`kit.score.metrics.summary` per run and labels every
method with its run (``<run>/<method>`` when there are several runs), and writes into ``out_dir``:

- ``report.html``: everything below, plots embedded as base64 PNG (no external file needed);
- ``report.md``: the same tables, plots linked from ``plots/*.png``;
- ``report.json``: the summary rows (same numbers as :func:`kit.score.metrics.summary`), per category rows,
  failures, compile errors, flagged records, provenance, calibration;
- ``summary.csv``: one row per run, method (, split) and category (``category == "all"`` for the overall row).

Sections: headline table (paper Table 4/5: CSR, FCR, fast_p with bootstrap 95 % CIs), stage funnel (Fig. 3),
per-category CSR/FCR/fast_1.0 (Fig. 4/5), speedup distribution with the noise floor band, per-task speedups
(marked inside their task's A/A noise band), the tasks without a native baseline, untimeable, or left with
only harness errors, flagged candidates, failure breakdown by status and error kind, the most common compile
errors, where the timings ran (host, Ray node, adb device; emulated marked), the baseline tables, run
provenance.
"""

from __future__ import annotations

import base64
import html
import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from kit.report.acrossruns import across_runs
from kit.report.baselines import baselines_note, baselines_table, drift_table
from kit.report.data import ReportError, Run, read_runs
from kit.report.formats import (
    html_page,
    html_table,
    jsonable,
    md_page,
    md_table,
    report_json,
    summary_csv,
)
from kit.report.places import emulated_note, places_note, places_table
from kit.report.plots import plot_categories, plot_failures, plot_funnel, plot_speedups, plot_turns
from kit.report.tables import (
    HEADLINE_PS,
    INSIDE_NOISE_MARK,
    Scores,
    category_table,
    edge_failures_table,
    headline_table,
    kind_table,
    native_incorrect_table,
    no_native_table,
    provenance_table,
    score_runs,
    speedup_table,
    status_table,
    task_list_table,
    untimeable_table,
)
from kit.report.turns import turn_table
from kit.score import metrics, noisefloor


@dataclass(frozen=True)
class ReportPaths:
    """The files :func:`build_report` wrote."""

    html: Path
    markdown: Path
    json: Path
    csv: Path
    plots: dict[str, Path]


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
    native: metrics.NativeRule | None = None,
) -> ReportPaths:
    """Write the report of ``run_dirs`` into ``out_dir`` (see the module docstring); return the paths.

    Args:
        run_dirs: one or more run directories; several are compared side by side, methods labelled by run.
        out_dir: created if missing; existing report files are overwritten.
        tasks: the task table (``task_id``, ``category``, ``split``) or a list of :class:`kit.suite.tasks.Task`.
        ps: fast_p thresholds of the headline table (the funnel and category plots add 0.5, 1.0, 1.5).
        n_boot, seed: bootstrap of the CIs (:func:`kit.score.metrics.summary`).
        native: the tasks the audit marked native_incorrect, with native's mismatch (:class:`kit.score.metrics.
            NativeRule`): listed in the report, not scored for fast_p unless ``native.scored``.

    Raises:
        ReportError: no run directories, a run without records, records of no task in ``tasks``, or a
            malformed run input file.
        kit.score.metrics.MetricsError: records unusable for metrics.
    """
    if not run_dirs:
        raise ReportError("run_dirs: give at least one run directory")
    run_dirs = [Path(d) for d in run_dirs]
    out_dir = Path(out_dir)
    runs = read_runs(run_dirs, metrics.as_task_table(tasks))
    _check_writable(out_dir)  # after the inputs are known good: a refused report leaves no folder behind

    native = native or metrics.NativeRule()
    scores = score_runs(runs, tuple(sorted(set(ps) | {0.5, 1.0, 1.5})), n_boot, seed, native)
    turns = turn_table(runs)
    plots_png = _plots(scores) | ({"turns": plot_turns(turns)} if turns.height else {})
    plot_paths = _write_plots(out_dir, plots_png)
    sections = _sections(runs, scores, ps, plots_png)
    at = next(i for i, (title, _, _) in enumerate(sections) if title == "Tasks without a native baseline")
    sections[at:at] = _trust_sections(plots_png, scores, native)
    if turns.height:  # after the headline: how the scores grow with the turns of mkb refine
        sections.insert(1, _Sections(plots_png).one("By refinement turn", turns, plot="turns", note=TURNS_NOTE))
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    paths = ReportPaths(
        html=out_dir / "report.html",
        markdown=out_dir / "report.md",
        json=out_dir / "report.json",
        csv=out_dir / "summary.csv",
        plots=plot_paths,
    )
    paths.html.write_text(html_page(sections, generated), encoding="utf-8")
    paths.markdown.write_text(md_page(sections, generated), encoding="utf-8")
    content = report_json(runs, scores, ps, n_boot, seed, generated) | (
        {"turns": turns.to_dicts()} if turns.height else {})
    paths.json.write_text(json.dumps(jsonable(content), indent=1), encoding="utf-8")
    summary_csv(scores).write_csv(paths.csv)
    return paths


def _plots(scores: Scores) -> dict[str, bytes]:
    """The four figures as PNG bytes, by name (also the file name under ``plots/`` and the image alt text)."""
    return {
        "funnel": plot_funnel(scores.relabel(scores.summary)),
        "categories": plot_categories(scores.relabel(scores.by_cat), scores.categories),
        "speedups": plot_speedups(scores.relabel(scores.per_task), scores.calibration),
        "failures": plot_failures(scores.fail),
    }


def _write_plots(out_dir: Path, plots_png: dict[str, bytes]) -> dict[str, Path]:
    """Write each figure to ``out_dir/plots/<name>.png``; return the paths by name."""
    out_dir.mkdir(parents=True, exist_ok=True)
    plot_dir = out_dir / "plots"
    plot_dir.mkdir(exist_ok=True)
    plot_paths = {}
    for name, png in plots_png.items():
        plot_paths[name] = plot_dir / f"{name}.png"
        plot_paths[name].write_bytes(png)
    return plot_paths


@dataclass
class _Sections:
    """The report's sections, each as ``(title, html, markdown)``; plots are taken from ``plots_png``."""

    plots_png: dict[str, bytes]
    items: list[tuple[str, str, str]] = field(default_factory=list)

    def add(
        self, title: str, df: pl.DataFrame | None = None, plot: str | None = None, note: str = ""
    ) -> None:
        h, m = "", ""
        if note:
            h += f'<p class="note">{html.escape(note)}</p>'
            m += note + "\n\n"
        if df is not None:
            if df.height:
                h += html_table(df)
                m += md_table(df) + "\n\n"
            else:
                h += '<p class="note">none</p>'
                m += "none\n\n"
        if plot is not None:
            b64 = base64.b64encode(self.plots_png[plot]).decode("ascii")
            h += f'<img alt="{plot}" src="data:image/png;base64,{b64}">'
            m += f"![{plot}](plots/{plot}.png)\n\n"
        self.items.append((title, h, m))

    def one(self, title: str, df: pl.DataFrame | None = None, plot: str | None = None,
            note: str = "") -> tuple[str, str, str]:
        """A section made alone (to be placed by the caller)."""
        self.add(title, df, plot, note)
        return self.items.pop()


def _sections(
    runs: list[Run], scores: Scores, ps: tuple[float, ...], plots_png: dict[str, bytes]
) -> list[tuple[str, str, str]]:
    """The report's sections in order, each as ``(title, html, markdown)``."""
    sections = _Sections(plots_png)
    add = sections.add
    add("Headline", headline_table(scores.summary, ps), note=_intro(runs))
    add(
        "Stage funnel",
        plot="funnel",
        note="Share of all tasks that compile, are correct, and are faster than 0.5×, 1×, 1.5× native.",
    )
    add(
        "Per category",
        category_table(scores.relabel(scores.by_cat), scores.categories),
        plot="categories",
        note="Each cell: CSR / FCR / fast_1.0 in % of the category's tasks.",
    )
    add("Speedup distribution", plot="speedups", note=_calibration_note(scores.calibration) + emulated_note(runs))
    add("Per-task speedups", speedup_table(scores.relabel(scores.per_task)), note=_speedups_note(runs))
    add("Tasks without a native baseline", no_native_table(scores.summary))
    add("Untimeable tasks", untimeable_table(scores.summary, runs),
        note="Native op time too short to time on this machine: correct, but no speedup is scored.")
    add("Tasks left with only harness errors",
        task_list_table(scores.summary, "harness_error_tasks", "tasks with only harness errors"),
        note="A harness error is the kit's fault, not the candidate's: such a task counts as missing (a failure) "
        "until a resumed mkb eval retries its jobs.")
    add("Flagged candidates", scores.flagged,
        note="Records carrying a flag; a speedup flagged implausible_speedup is not scored.")
    add("Outcomes by status (samples)", status_table(scores.fail), plot="failures")
    add("Failures by error kind (samples)", kind_table(scores.fail))
    add(
        "Most common compile errors",
        scores.errors,
        note="First error diagnostic of each compile_error sample, normalized (names and numbers masked).",
    )
    places = places_table(runs)
    add("Where the timings ran", places, note=places_note(places))
    add("Baseline tables", baselines_table(runs), note=baselines_note(runs))
    add("Native times drifting from the baseline table", drift_table(runs))
    if len(runs) > 1:
        differing, note = across_runs(runs)
        add("Speedups that differ across runs", differing, note=note)
    add("Provenance", provenance_table(runs))
    return sections.items


def _trust_sections(plots_png: dict[str, bytes], scores: Scores,
                    native: metrics.NativeRule) -> list[tuple[str, str, str]]:
    """The sections on what the scores can trust: the tasks whose pinned native build is incorrect, and the edge
    sets each task's correct samples failed (strict FCR)."""
    sections = _Sections(plots_png)
    rule = ("scored for fast_p anyway (report.score_native_incorrect = true)" if native.scored else
            "counted for CSR and FCR, never for fast_p or the geomean (report.score_native_incorrect = false)")
    sections.add("Tasks whose native MNN is incorrect", native_incorrect_table(dict(native.marks)),
                 note=f"The pinned native build disagrees with ONNX Runtime on these tasks (mkb tasks audit): {rule}.")
    sections.add("Edge sets failed", edge_failures_table(scores.relabel(scores.per_task)),
                 note="Edge input sets (kit.suite.edges) a task's correct samples failed while native MNN passed "
                 "them: FCR counts such a sample, strict FCR does not.")
    return sections.items


TURNS_NOTE = ("Each turn T: every task's best-of-k over the answers of turns 1..T of its chains (mkb refine), in % "
              "of the run's tasks.")


def _denominator(r: Run) -> str:
    text = ", ".join(f"{s}: {n} tasks" for s, n in r.tasks.group_by("split").len().sort("split").iter_rows())
    return text + (" selected by tasks.ids" if r.selected else "")


def _intro(runs: list[Run]) -> str:
    """The note under the headline: the runs, their denominators and how the numbers are counted."""
    denoms = {_denominator(r) for r in runs}
    denom = denoms.pop() if len(denoms) == 1 else "; ".join(f"{r.label}: {_denominator(r)}" for r in runs)
    return (
        f"Runs: {', '.join(f'{r.label} ({r.dir})' for r in runs)}. Denominator: all tasks of the split, or of "
        f"the run's tasks.ids selection ({denom}); "
        "a task without a record, or with only harness errors, counts as a failure. Rates in %, 95 % bootstrap "
        "CI over tasks in brackets. Best of the samples per task. FCR counts correct tasks; fast_p counts correct "
        "tasks with a usable speedup > p. Unlike KernelBench, whose fast_0 is its correctness rate (FCR here), "
        "fast_0 can be below FCR: a correct task without a usable speedup (no native baseline, timed under "
        "emulation, timing failed, untimeable, or an implausible speedup) never counts as fast. fast_sig_1.0 "
        "also needs the speedup's CI low bound above 1 and, with a per-task A/A calibration, the speedup beyond "
        "its task's noise band."
    )


def _speedups_note(runs: list[Run]) -> str:
    """The note over the per-task speedup table: what a cell holds and where the noise bands come from."""
    with_noise = [f"{r.label} ({len(r.calibration['noise'])} tasks)" for r in runs
                  if r.calibration and r.calibration.get("noise")]
    if with_noise:
        where = f"per-task A/A noise bands from calibration.json: {', '.join(with_noise)}"
    elif any(r.calibration and r.calibration.get("source") == "calibration.json" for r in runs):
        where = "no per-task A/A noise bands (its calibration.json has no noise_log: an older mkb calibrate)"
    else:
        where = "no per-task A/A noise bands (no calibration.json: copy mkb calibrate's into the run directory)"
    note = (f"Best usable speedup per task (native ms / candidate ms); {INSIDE_NOISE_MARK}: inside its task's "
            f"A/A noise band (|ln speedup| <= noise_log), not distinguishable from native; {where}.")
    return note + emulated_note(runs)


def _calibration_note(calibration: dict[str, Any] | None) -> str:
    if calibration is None or calibration.get("low") is None:
        return "no calibration (no calibration.json/.parquet and no native method in the runs)"
    note = (f"A/A noise floor (native vs native speedup, p05–p95): {calibration['low']:.3f}–"
            f"{calibration['high']:.3f}× from {calibration['source']}")
    summary = calibration.get("summary") or {}
    if summary.get("coverage") is not None:  # written by mkb calibrate since the interval over rounds
        note += ". " + noisefloor.coverage_line(summary)
    return note
