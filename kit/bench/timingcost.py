"""Benchmark 4 (``--timing-cost``): what the timing and verification defaults cost per candidate, side by side.

The same candidate (the task's native model on both sides: the cost does not depend on the kernel's code) is
timed with the former defaults (3 rounds x 100 iterations, an interval from resampling single iterations) and
with the current ones (``timing.rounds`` x ``timing.iterations``, the interval over rounds), interleaved A B A B
in one process; verification likewise with and without the extra thread counts (``verify.extra_threads``).
Prints the median seconds of each and the added cost per candidate.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from kit.bench.common import real_engine, write_config
from kit.job.worker import setup_worker
from kit.settings.config import load_config
from kit.stages import timing as stiming
from kit.stages import verify as sverify
from kit.suite.tasks import load_suite


def _seconds(fn) -> float:
    t = time.monotonic()
    fn()
    return time.monotonic() - t


def timing_cost(task_id: str | None, repeats: int) -> int:
    """Benchmark 4 (see the module docstring)."""
    real = real_engine()
    task_id = task_id or ("hard_sigmoid_4d" if real else "fx_argmax")
    with tempfile.TemporaryDirectory(prefix="mkb-timingcost-") as tmp_s:
        tmp = Path(tmp_s)
        cfg = load_config(write_config(tmp, real, task_id, tmp / "none"))
        task = next(t for t in load_suite(cfg.tasks.dir) if t.id == task_id)
        worker = setup_worker(cfg)
        try:
            model = worker.native_models.model(task)
            if model is None:
                raise SystemExit(f"native MNN cannot convert {task_id}: pick another --task")
            side = sverify.SideModel(model, worker.native_side)
            new = worker.timing
            old = replace(new, rounds=3, iterations=100)
            v_new = worker.settings.verify
            v_old = replace(v_new, extra_threads=())
            cost: dict[str, list[float]] = {"timing old": [], "timing new": [], "verify old": [], "verify new": []}
            for i in range(repeats):
                for label, opts in (("timing old", old), ("timing new", new)):
                    cost[label].append(_seconds(lambda o=opts, d=tmp / f"{label}-{i}": stiming.time_candidate(
                        task, side, side, o, stiming.TimingSetup(worker.native.runner, d))))
                for label, vopts in (("verify old", v_old), ("verify new", v_new)):
                    cost[label].append(_seconds(lambda o=vopts, d=tmp / f"{label}-{i}": sverify.verify(
                        task, model, worker.native_side, worker.native.runner, d, o)))
        finally:
            worker.workspace.release()
    med = {k: statistics.median(v) for k, v in cost.items()}
    print(f"engine: {'MNN ' + cfg.mnn.version if real else 'fixture'}; task {task_id}; {repeats} interleaved repeats")
    print(f"timing, former defaults (3 rounds x 100 iterations, warm-up {new.warmup}): {med['timing old']:.2f} s; "
          f"current ({new.rounds} rounds x {new.iterations}): {med['timing new']:.2f} s; "
          f"ratio {med['timing new'] / med['timing old']:.2f}, added {med['timing new'] - med['timing old']:+.2f} s")
    print(f"verification, {v_new.trials} trials: {med['verify old']:.2f} s; with {v_new.extra_trials} more at each of "
          f"{list(v_new.extra_threads)} threads: {med['verify new']:.2f} s; added "
          f"{med['verify new'] - med['verify old']:+.2f} s")
    added = med["timing new"] - med["timing old"] + med["verify new"] - med["verify old"]
    print(f"added per candidate by the new defaults: {added:+.2f} s")
    return 0
