"""The report's "Where the timings ran" section: for the timed records of each run (a candidate time measured,
``candidate_ms``), the machine that timed them, from the record's ``timing_device`` (:mod:`kit.host.target`):

* ``host`` / ``qemu``: this host (``timing_host``, else ``host``: the node that built also timed), natively or
  under the emulator;
* ``ray:<label>``: the Ray timing node ``timing_host`` carrying the resource ``<label>``;
* ``adb:<serial>``: the Android device, by its model, SoC and serial (from the record's ``device`` state);
* empty (records older than the target fields): the record's ``host``.

Timings taken under emulation (``timing_emulated``: qemu, a Ray node of another architecture, a device that
says it is an emulator) are marked: they are recorded and never scored (:mod:`kit.score.metrics`).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from kit.report.data import Run

#: the columns of the section's table
COLUMNS = ("run", "timed on", "timing_device", "cores", "emulated", "timed records", "methods")


def place(record: dict[str, Any]) -> str:
    """Where one record was timed, in words (module docstring); ``?`` for a part the record lacks."""
    where = record.get("timing_device") or ""
    node = record.get("timing_host") or record.get("host") or "?"
    if where.startswith("adb:"):
        dev = record.get("device") or {}
        serial = dev.get("serial") or where.removeprefix("adb:")
        return f"adb device {dev.get('model') or '?'} ({dev.get('soc') or '?'}), serial {serial}"
    if where.startswith("ray:"):
        return f"Ray node {node} (resource {where.removeprefix('ray:')})"
    if where == "qemu":
        return f"host {node}, under qemu"
    return f"host {node}"


def _cores(record: dict[str, Any]) -> str:
    cores = record.get("timing_cores")
    return ", ".join(map(str, cores)) if cores else "any"


def places_table(runs: list[Run]) -> pl.DataFrame:
    """One row per run and place that timed some of its records (:data:`COLUMNS`): the place in words, the raw
    ``timing_device``, the cores the runners were pinned to, ``yes (unscored)`` when timed under emulation, how
    many records and of which methods."""
    rows: dict[tuple[str, str, str, str, bool], dict[str, Any]] = {}
    for run in runs:
        recs = run.records
        if "candidate_ms" not in recs.columns:
            continue
        for r in recs.filter(pl.col("candidate_ms").is_not_null()).iter_rows(named=True):
            emulated = bool(r.get("timing_emulated"))
            key = (run.label, place(r), r.get("timing_device") or "", _cores(r), emulated)
            row = rows.setdefault(key, {"n": 0, "methods": set()})
            row["n"] += 1
            row["methods"].add(r.get("method") or "?")
    out = [{"run": k[0], "timed on": k[1], "timing_device": k[2] or "(not recorded)", "cores": k[3],
            "emulated": "yes (unscored)" if k[4] else "no", "timed records": v["n"],
            "methods": ", ".join(sorted(v["methods"]))} for k, v in sorted(rows.items())]
    return pl.DataFrame(out, schema={c: (pl.Int64 if c == "timed records" else pl.String) for c in COLUMNS})


def places_note(table: pl.DataFrame) -> str:
    """The note over the table: what it counts, and how many timed records were emulated."""
    emulated = int(table.filter(pl.col("emulated") != "no")["timed records"].sum()) if table.height else 0
    note = ("Where the timed records (a candidate time measured) were timed: this host, a Ray timing node, or an "
            "adb device (model, SoC, serial); cores: those the runners were pinned to.")
    if emulated:
        note += (f" {emulated} timed record(s) ran under emulation: their timings are recorded and never scored "
                 "(fast_p and speedups leave them out).")
    return note


def emulated_note(runs: list[Run]) -> str:
    """A sentence for the speedup sections when some timed records ran under emulation (empty otherwise): a run
    timed only under qemu or on an emulated device otherwise shows "none" there without saying why."""
    n = sum(r.records.filter(pl.col("candidate_ms").is_not_null() & pl.col("timing_emulated").fill_null(False)).height
            for r in runs if {"candidate_ms", "timing_emulated"} <= set(r.records.columns))
    if not n:
        return ""
    return (f" {n} timed record(s) ran under emulation and are left out here (never scored; see \"Where the "
            "timings ran\").")
