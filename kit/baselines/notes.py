"""The line ``mkb eval`` prints under its summary about where the native times came from."""

from __future__ import annotations

import math

import polars as pl

from kit.score.betweenrun import DEFAULT_LOG_SD


def native_timing_note(records: pl.DataFrame) -> str | None:
    """``native times: baseline table KEY (N records; only the candidates were timed)`` when some records took
    their native time from a baseline table, also naming how many timed it interleaved when both occur (never
    silently one summary of the two); None when every native time was interleaved (the kit's method)."""
    if "native_timing" not in records.columns:
        return None
    table = records.filter(pl.col("native_timing") == "table")
    if table.height == 0:
        return None
    keys = ", ".join(sorted(set(table["baseline_key"].to_list())))
    line = (f"native times: baseline table {keys} ({table.height} records; only the candidates were timed, "
            "baselines.native_timing = \"table\"; intervals widened by the table's between-run sd of native "
            f"times, or {100 * math.expm1(DEFAULT_LOG_SD):.1f} % without one)")
    interleaved = records.filter(pl.col("native_timing") == "interleaved").height
    if interleaved:
        line += f"; MIXED with {interleaved} records timed interleaved: these speedups are not like for like"
    return line
