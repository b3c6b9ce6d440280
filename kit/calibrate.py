"""``mkb calibrate``: the native method on every task of a split, timed against itself (A/A).

Which tasks native MNN passes, and the spread of native-vs-native speedups: the timing noise floor that a
candidate's speedup must clear.  Records go to ``<run.dir>/calibration/`` (resumed like a run); the summary
to ``<run.dir>/calibration.json``, which a run's report reads for its noise band.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from kit import candidates as kcand
from kit.config import EvalConfig
from kit.evaluate import execute
from kit.jobs import job_from
from kit.mnn.source import ensure_pristine
from kit.records import Status
from kit.serial import SerialExecutor
from kit.shards import done_job_ids, read_records
from kit.tasks import load_suite


def calibrate(cfg: EvalConfig) -> int:
    """``mkb calibrate``: run the native method on every task of ``cfg``'s split in this process; write
    ``calibration.json`` in the run directory (per task: native passes?, A/A speedup and its CI) and print the
    noise floor.  Returns 0."""
    tasks = load_suite(cfg.tasks.dir, cfg.tasks.split, cfg.tasks.ids or None)
    run_dir = cfg.run.dir / "calibration"
    run_dir.mkdir(parents=True, exist_ok=True)
    root = ensure_pristine(cfg.mnn).root  # the native method's files are the tree's own
    jobs = [job_from(kcand.native_candidate(t, root), t, cfg.digest()) for t in tasks]
    execute(jobs, done_job_ids(run_dir), run_dir, SerialExecutor(cfg), label="calibrate")
    rows = [_task_row(r) for r in read_records(run_dir).iter_rows(named=True)]
    summary = _summary(rows)
    (cfg.run.dir / "calibration.json").write_text(json.dumps({"summary": summary, "tasks": rows}, indent=1))
    print(json.dumps(summary, indent=1))
    failing = [r["task_id"] for r in rows if not r["native_passes"]]
    if failing:
        print(f"native {cfg.mnn.version} fails {len(failing)} task(s): {', '.join(failing)}")
    return 0


def _task_row(r: dict[str, Any]) -> dict[str, Any]:
    """One task's calibration entry from its record."""
    return {
        "task_id": r["task_id"],
        "native_passes": r["status"] in (Status.OK.value, Status.TIMING_FAILED.value),
        "status": r["status"],
        "error_kind": r["error_kind"],
        "speedup": r["speedup"],
        "speedup_ci_low": r["speedup_ci_low"],
        "speedup_ci_high": r["speedup_ci_high"],
        "native_ms": r["native_ms"],
    }


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Tasks, how many native passes, and the median and 5th/95th percentiles of the A/A speedups."""
    speeds = np.array([r["speedup"] for r in rows if r["speedup"] is not None], dtype=float)
    return {
        "tasks": len(rows),
        "native_passes": sum(r["native_passes"] for r in rows),
        "aa_speedup_median": float(np.median(speeds)) if speeds.size else None,
        "aa_speedup_p05": float(np.percentile(speeds, 5)) if speeds.size else None,
        "aa_speedup_p95": float(np.percentile(speeds, 95)) if speeds.size else None,
    }
