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

``mkb calibrate --between-runs DIR...`` times nothing: it reads several **separate** runs of this host, each
``mkb calibrate``'s ``calibration.json`` (its A/A log speedups) and/or an ``mkb eval`` run's records (its
candidates' log speedups: the same candidates evaluated in each), together with the config's run directory's
own, estimates the between-run sd (:mod:`kit.score.betweenrun`: DerSimonian-Laird, a mean per task and group,
pooled and per task with enough runs) and writes it into the config's ``<run.dir>/calibration.json`` as
``between_run`` (that file's other content kept; without one, the first given calibration's copied), which
``mkb reproduce`` and the report use for speedups compared across runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from kit import candidates as kcand
from kit.job.record import job_from
from kit.mnn.source import ensure_pristine
from kit.outline.evaluate import execute
from kit.results.schema import ShardError
from kit.results.shards import done_job_ids, read_records, shard_paths
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
    """``--between-runs`` got fewer than 2 separate runs to compare, or a path that is neither a calibration nor an
    evaluation run (names each)."""


def _calibration_file(path: Path) -> Path:
    return path / CALIBRATION_FILE if path.is_dir() else path


def _read_calibration(f: Path) -> dict:
    data = json.loads(f.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list):
        raise ValueError("not a calibration.json of mkb calibrate (no 'tasks' list)")
    return data


def _sources(paths: list[Path], confidence: float) -> tuple[list[tuple[str, dict]], dict[Path, dict], list[str]]:
    """The between-run points of ``paths``: ``([(source, {group key: (y, se)})], {calibration file: its content}
    in the order read, [problems])``.  A calibration.json (or a folder holding one) gives A/A points, a folder
    with record shards (an ``mkb eval`` run) its candidates' points
    (:func:`kit.score.betweenrun.points_from_records`); a calibration copied into several folders counts once
    (the same points)."""
    found: list[tuple[str, dict]] = []
    contents: dict[Path, dict] = {}
    bad: list[str] = []
    for path in paths:
        cal, shards = _calibration_file(path), path.is_dir() and shard_paths(path)
        if not cal.is_file() and not shards:
            bad.append(f"not found: {cal} (nor record shards in {path})")
        if cal.is_file():
            try:
                data = contents[cal] = _read_calibration(cal)
                points = {f"{t}@aa": pt for t, pt in betweenrun.points_from_calibration(data, confidence).items()}
                if points and all(points != p for _s, p in found):
                    found.append((str(cal), points))
            except (OSError, ValueError, TypeError, AttributeError, KeyError) as exc:
                bad.append(f"unreadable: {cal}: {exc}")
        if shards:
            try:
                found.append((str(path), betweenrun.points_from_records(read_records(path), confidence)))
            except (ShardError, OSError, pl.exceptions.PolarsError) as exc:
                bad.append(f"unreadable records: {path}: {exc}")
    return found, contents, bad


def combine(cfg: EvalConfig, runs: list[Path]) -> int:
    """``mkb calibrate --between-runs``: the between-run sd of ``runs`` (run directories of ``mkb calibrate`` or
    their calibration.json; run directories of ``mkb eval`` that evaluated the same candidates) and of
    ``cfg.run.dir``'s own, written into ``cfg.run.dir``'s calibration.json (module docstring).  Returns 0.

    Raises:
        CalibrationError: fewer than 2 separate runs with points, or a path given is neither."""
    own = cfg.run.dir / CALIBRATION_FILE  # run.dir is a folder, made below if it is not there yet
    paths = list(dict.fromkeys(p.resolve() for p in [*runs, *([cfg.run.dir] if cfg.run.dir.exists() else [])]))
    found, contents, bad = _sources(paths, cfg.timing.confidence)
    by_group: dict[str, list[tuple[float, float]]] = {}
    for _src, points in found:
        for key, pt in points.items():
            by_group.setdefault(key, []).append(pt)
    if bad or not any(len(g) >= 2 for g in by_group.values()):
        raise CalibrationError("--between-runs needs at least 2 separate runs of the same tasks (run directories of "
                               "mkb calibrate or their calibration.json, or run directories of mkb eval that "
                               f"evaluated the same candidates); {len(found)} read" + "".join(f"; {b}" for b in bad))
    est = betweenrun.estimate(by_group) | {"sources": [src for src, _p in found]}
    base = contents.get(own.resolve()) or next(iter(contents.values()), {"summary": {}, "tasks": []})
    cfg.run.dir.mkdir(parents=True, exist_ok=True)
    own.write_text(json.dumps(base | {"between_run": est}, indent=1))
    print(json.dumps({k: est[k] for k in ("method", "pooled")} | {"tasks_with_own_figure": len(est["tasks"])}, indent=1))
    print(betweenrun.estimate_line(est) + f"; written to {own}")
    return 0
