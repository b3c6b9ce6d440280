"""Reports of one or more runs: self-contained HTML, Markdown, JSON and CSV, with plots.

:func:`build_report` writes the report of one or more run directories into a folder.  Layers, each
importing only those before it: :mod:`~kit.report.data` (a run's records, denominator, provenance and
noise floor), :mod:`~kit.report.tables` (metrics per run, display tables), :mod:`~kit.report.plots`
(matplotlib figures), :mod:`~kit.report.formats` (HTML/Markdown tables and pages, report.json, summary.csv),
:mod:`~kit.report.render` (the sections and :func:`build_report`).
"""

from kit.report.data import (
    PROVENANCE_KEYS,
    ReportError,
    Run,
    load_calibration,
    load_provenance,
    load_records,
    read_runs,
    run_tasks,
)
from kit.report.formats import REPORT_SCHEMA_VERSION
from kit.report.plots import FUNNEL, STATUS_COLORS, plot_categories, plot_failures, plot_funnel, plot_speedups
from kit.report.render import ReportPaths, build_report
from kit.report.tables import (
    HEADLINE_PS,
    INSIDE_NOISE_MARK,
    TOP_ERRORS,
    Scores,
    category_order,
    category_table,
    compile_errors,
    failures,
    flagged_table,
    headline_table,
    kind_table,
    no_native_table,
    normalize_message,
    provenance_table,
    score_runs,
    speedup_table,
    status_table,
    task_list_table,
    untimeable_table,
)

__all__ = [
    "FUNNEL",
    "HEADLINE_PS",
    "INSIDE_NOISE_MARK",
    "PROVENANCE_KEYS",
    "REPORT_SCHEMA_VERSION",
    "STATUS_COLORS",
    "TOP_ERRORS",
    "ReportError",
    "ReportPaths",
    "Run",
    "Scores",
    "build_report",
    "category_order",
    "category_table",
    "compile_errors",
    "failures",
    "flagged_table",
    "headline_table",
    "kind_table",
    "load_calibration",
    "load_provenance",
    "load_records",
    "no_native_table",
    "normalize_message",
    "plot_categories",
    "plot_failures",
    "plot_funnel",
    "plot_speedups",
    "provenance_table",
    "read_runs",
    "run_tasks",
    "score_runs",
    "speedup_table",
    "status_table",
    "task_list_table",
    "untimeable_table",
]
