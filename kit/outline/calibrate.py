"""``mkb calibrate``: the native method on every task of a split, timed against itself (A/A).

Which tasks native MNN passes, and how well the timing method's intervals hold where nothing differs: the
**coverage** (the share of timed tasks whose speedup interval contains 1.0; a 95 % interval should hold for
>= 95 % of them), the median interval width beside it (an interval that holds only by being wide is no
answer), how often native itself would score ``fast_1.0`` and its significant variant, and per task the
**noise floor** ``noise_log = ln(ci_high / ci_low) / 2`` (the half-width of its A/A interval on the log scale:
a candidate's speedup ``s`` is inside the noise band of its task when ``|ln s| <= noise_log``) and whether it is
**untimeable** (native op time below ``timing.min_native_ms``).  Records go to ``<run.dir>/calibration/``
(resumed like a run); the summary and the per-task entries to ``<run.dir>/calibration.json``, which a run's
report reads (copy it into the run directory).

``mkb calibrate --between-runs DIR...`` times nothing: it reads the ``calibration.json`` of several **separate**
calibrations of this host (each its own ``mkb calibrate`` with its own ``--run.dir``, ideally hours apart) and
the config's run directory's own, estimates the between-run sd of the A/A log speedups
(:mod:`kit.score.betweenrun`: DerSimonian-Laird, pooled and per task with enough runs) and writes it into the
config's ``<run.dir>/calibration.json`` as ``between_run`` (that file's other content kept; without one, the
last given run's copied), which ``mkb reproduce`` and the report use for speedups compared across runs.
"""

from __future__ import annotations

import json
from pathlib import Path

from kit import candidates as kcand
from kit.job.record import job_from
from kit.mnn.source import ensure_pristine
from kit.outline.evaluate import execute
from kit.results.shards import done_job_ids, read_records
from kit.run.rundir import prepare as prepare_run_dir
from kit.run.rundir import release as release_run_dir
from kit.run.serial_executor import SerialExecutor
from kit.score import betweenrun
from kit.score.betweenrun import CALIBRATION_FILE
from kit.score.noisefloor import coverage_line, summarize, task_row
from kit.settings.config import EvalConfig
from kit.suite.listing import check_selected
from kit.suite.tasks import load_suite


def calibrate(cfg: EvalConfig) -> int:
    """``mkb calibrate``: run the native method on every task of ``cfg``'s split in this process; write
    ``calibration.json`` in the run directory (:func:`kit.score.noisefloor.summarize`, and per task: native passes?, A/A speedup, its
    interval, noise floor, untimeable) and print the summary.  Returns 0."""
    tasks = load_suite(cfg.tasks.dir, cfg.tasks.split, cfg.tasks.ids or None)
    check_selected(cfg.tasks.dir, tasks)
    # the records live in <run.dir>/calibration, a run directory like any: one configuration, one writer
    cal = cfg.model_copy(update={"run": cfg.run.model_copy(update={"dir": cfg.run.dir / "calibration"})})
    run_dir = prepare_run_dir(cal)
    try:
        root = ensure_pristine(cfg.mnn).root  # the native method's files are the tree's own
        jobs = [job_from(kcand.native_candidate(t, root), t, cfg.digest(), cfg.target_info()) for t in tasks]
        # the worker runs with the calibration's run directory: its baseline-table entries name it as their source
        execute(jobs, done_job_ids(run_dir), run_dir, SerialExecutor(cal), label="calibrate")
    finally:
        release_run_dir(run_dir)
    selected = {t.id for t in tasks}  # this selection's tasks only, not every task calibrated there before
    rows = [task_row(r) for r in read_records(run_dir).iter_rows(named=True) if r["task_id"] in selected]
    summary = summarize(rows, cfg.timing.confidence)
    (cfg.run.dir / CALIBRATION_FILE).write_text(json.dumps({"summary": summary, "tasks": rows}, indent=1))
    print(json.dumps(summary, indent=1))
    print(coverage_line(summary))
    failing = [r["task_id"] for r in rows if not r["native_passes"]]
    if failing:
        print(f"native {cfg.mnn.version} fails {len(failing)} task(s): {', '.join(failing)}")
    return 0


class CalibrationError(Exception):
    """``--between-runs`` got fewer than 2 readable calibrations (names each that is not one)."""


def _calibration_file(path: Path) -> Path:
    return path / CALIBRATION_FILE if path.is_dir() else path


def combine(cfg: EvalConfig, runs: list[Path]) -> int:
    """``mkb calibrate --between-runs``: the between-run sd of ``runs`` (run directories or calibration.json
    files) and of ``cfg.run.dir``'s own calibration, written into the latter (module docstring).  Returns 0.

    Raises:
        CalibrationError: fewer than 2 distinct readable calibrations, or one given is not a calibration."""
    own = cfg.run.dir / CALIBRATION_FILE  # run.dir is a folder, made below if it is not there yet
    files = list(dict.fromkeys(p.resolve() for p in [*(_calibration_file(r) for r in runs), own] if p.exists()))
    bad, datas = [], []
    for f in files:
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or not isinstance(data.get("tasks"), list):
                raise ValueError("not a calibration.json of mkb calibrate (no 'tasks' list)")
            datas.append((f, data, betweenrun.points_from_calibration(data, cfg.timing.confidence)))
        except (OSError, ValueError, TypeError, AttributeError, KeyError) as exc:
            bad.append(f"{f}: {exc}")
    missing = [str(_calibration_file(r)) for r in runs if not _calibration_file(r).exists()]
    if bad or missing or len(datas) < 2:
        raise CalibrationError("--between-runs needs at least 2 separate calibrations (run directories of mkb "
                               f"calibrate, or their calibration.json); {len(datas)} read" +
                               "".join(f"; not found: {m}" for m in missing) + "".join(f"; unreadable: {b}" for b in bad))
    by_task: dict[str, list[tuple[float, float]]] = {}
    for _f, _d, points in datas:
        for tid, pt in points.items():
            by_task.setdefault(tid, []).append(pt)
    est = betweenrun.estimate(by_task) | {"sources": [str(f) for f, _d, _p in datas]}
    base = next((d for f, d, _p in datas if f == own.resolve()), datas[-1][1])
    cfg.run.dir.mkdir(parents=True, exist_ok=True)
    own.write_text(json.dumps(base | {"between_run": est}, indent=1))
    print(json.dumps({k: est[k] for k in ("method", "pooled")} | {"tasks_with_own_figure": len(est["tasks"])}, indent=1))
    print(betweenrun.estimate_line(est) + f"; written to {own}")
    return 0
