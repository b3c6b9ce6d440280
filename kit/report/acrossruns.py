"""The report of several runs: each task's best usable speedup of a method in a later run against the first run
that has it, judged as ``mkb reproduce`` judges one candidate's (:mod:`kit.score.betweenrun`): different only
when ``|ln s1 - ln s2| > z sqrt(se1^2 + se2^2 + 2 tau^2)``, the between-run sd ``tau`` per task as
:func:`kit.baselines.between.resolver` finds it (the runs' ``calibration.json``, later run first, for a paired
speedup; the larger of that and the baseline tables' for a table-timed one; else the default).  Only runs of the
same hardware (``cpu_model``, ``arch`` of their provenance) are compared; the section lists the speedups that
differ and says which tau it used."""

from __future__ import annotations

import polars as pl

from kit.baselines.between import resolver
from kit.report.baselines import tables_root
from kit.report.data import Run
from kit.results import rules as scoring
from kit.score import betweenrun

COLUMNS = {"method": pl.String(), "task_id": pl.String(), "run_a": pl.String(), "speedup_a": pl.String(),
           "run_b": pl.String(), "speedup_b": pl.String(), "ratio": pl.Float64(), "between_run_sd": pl.String()}


def _hardware(run: Run) -> tuple[str, str]:
    return run.provenance.get("cpu_model", "unknown"), run.provenance.get("arch", "unknown")


def across_runs(runs: list[Run], confidence: float = 0.95) -> tuple[pl.DataFrame, str]:
    """The speedups of a later run that differ from the first same-hardware run's (:data:`COLUMNS`; ``ratio`` =
    b / a) and the section's note: how many were compared, with which between-run sd, and the runs left out."""
    if len(runs) < 2:
        return pl.DataFrame(schema=COLUMNS), ""
    rows, used, compared, skipped = [], {}, 0, []
    first = runs[0]
    for later in runs[1:]:
        if _hardware(later) != _hardware(first):
            skipped.append(later.label)
            continue
        tau_of = resolver([later.dir, first.dir], later.records, tables_root(later))
        a, b = scoring.best_speedups(first.records), scoring.best_speedups(later.records)
        for key in sorted(set(a) & set(b)):
            compared += 1
            tau = tau_of(key[1])
            used[tau.text()] = used.get(tau.text(), 0) + 1
            if betweenrun.differ(a[key], b[key], tau.log_sd, confidence):
                rows.append({"method": key[0], "task_id": key[1], "run_a": first.label, "speedup_a": a[key].text(),
                             "run_b": later.label, "speedup_b": b[key].text(),
                             "ratio": round(b[key].value / a[key].value, 3), "between_run_sd": tau.text()})
    note = (f"Each task's best usable speedup of a method in a later run against {first.label}'s: different when "
            "|ln s1 - ln s2| > z sqrt(se1^2 + se2^2 + 2 tau^2), se from each run's interval (over its own rounds) and "
            f"tau the between-run sd (docs/scoring.md, What an interval covers). {compared} speedups compared"
            + "".join(f"; {n} with {t}" for t, n in used.items())
            + (f"; not compared (other hardware): {', '.join(skipped)}" if skipped else "") + ".")
    return (pl.DataFrame(rows, schema=COLUMNS) if rows else pl.DataFrame(schema=COLUMNS)), note

