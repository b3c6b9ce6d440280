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
"""

from __future__ import annotations

import json

from kit import candidates as kcand
from kit.job.record import job_from
from kit.mnn.source import ensure_pristine
from kit.outline.evaluate import execute
from kit.results.shards import done_job_ids, read_records
from kit.run.rundir import prepare as prepare_run_dir
from kit.run.rundir import release as release_run_dir
from kit.run.serial_executor import SerialExecutor
from kit.score.noisefloor import coverage_line, summarize, task_row
from kit.settings.config import EvalConfig
from kit.suite.tasks import check_selected, load_suite


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
    (cfg.run.dir / "calibration.json").write_text(json.dumps({"summary": summary, "tasks": rows}, indent=1))
    print(json.dumps(summary, indent=1))
    print(coverage_line(summary))
    failing = [r["task_id"] for r in rows if not r["native_passes"]]
    if failing:
        print(f"native {cfg.mnn.version} fails {len(failing)} task(s): {', '.join(failing)}")
    return 0
