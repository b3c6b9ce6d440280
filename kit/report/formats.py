"""The report's file formats (:mod:`kit.report.render` writes them): HTML and Markdown tables and pages,
``report.json``'s content (NaN and infinities as null) and the rows of ``summary.csv``."""

from __future__ import annotations

import html
import math
from typing import Any

import polars as pl

from kit.report.data import Run
from kit.report.tables import Scores
from kit.score import metrics

REPORT_SCHEMA_VERSION = 1
TITLE = "MobileKernelBench report"


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return "n/a" if math.isnan(v) else f"{v:.4g}"
    if isinstance(v, list):
        return ", ".join(map(str, v))
    return str(v)


def html_table(df: pl.DataFrame, cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in df.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row) + "</tr>" for row in df.iter_rows()
    )
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def md_table(df: pl.DataFrame) -> str:
    def esc(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(esc(c) for c in df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(esc(_cell(v)) for v in row) + " |" for row in df.iter_rows()]
    return "\n".join(lines)


def jsonable(v: Any) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [jsonable(x) for x in v]
    return v


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:0.9em;display:block;overflow-x:auto;max-width:100%}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f2f2f2} tr:nth-child(even) td{background:#fafafa}
img{max-width:100%;border:1px solid #eee;margin:0.5em 0}
.note{color:#555;font-size:0.9em} code{background:#f4f4f4;padding:0 3px}
"""


def html_page(sections: list[tuple[str, str, str]], generated: str) -> str:
    body = "".join(f"<h2>{html.escape(t)}</h2>{h}" for t, h, _ in sections)
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{TITLE}</title><style>{_CSS}</style></head>'
        f'<body><h1>{TITLE}</h1><p class="note">generated {generated}</p>{body}</body></html>'
    )


def md_page(sections: list[tuple[str, str, str]], generated: str) -> str:
    return f"# {TITLE}\n\ngenerated {generated}\n\n" + "".join(f"## {t}\n\n{m}" for t, _, m in sections)


def report_json(
    runs: list[Run], scores: Scores, ps: tuple[float, ...], n_boot: int, seed: int, generated: str
) -> dict[str, Any]:
    """The content of ``report.json`` (before :func:`jsonable`)."""
    return {
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
        "splits": scores.splits,
        "summary": scores.summary.to_dicts(),
        "by_category": scores.by_cat.to_dicts(),
        "failures": scores.fail.to_dicts(),
        "compile_errors": scores.errors.to_dicts(),
        "flagged": scores.flagged.to_dicts(),
    }


def summary_csv(scores: Scores) -> pl.DataFrame:
    """The rows of ``summary.csv``: the overall rows (``category == "all"``), then the per category rows."""
    return pl.concat(
        [scores.summary.with_columns(category=pl.lit("all")), scores.by_cat], how="diagonal_relaxed"
    ).with_columns(pl.col(metrics.TASK_LIST_COLUMNS).list.join(";"))
