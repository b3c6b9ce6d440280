"""Benchmark 5 (``--sandbox-cost``): what the sandbox adds per candidate, side by side.

One worker runs the same candidate (the sample set's ``correct`` one for ``--task``) through the whole pipeline
(:func:`kit.job.pipeline.run_job`: register, build, convert, verify, time) with ``sandbox.mode = "none"`` (rlimits
only) and ``"bwrap"`` alternately, ``--repeats`` times each, in one process; prints the median seconds of each
and the ratio (target <= 1.10).  Needs bubblewrap.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from kit.bench.common import real_engine, sample_root, write_config
from kit.job.pipeline import run_job
from kit.job.record import Job
from kit.job.worker import setup_worker
from kit.settings.config import load_config
from kit.suite.tasks import load_suite


def sandbox_cost(task_id: str | None, repeats: int) -> int:
    """Benchmark 5 (see the module docstring)."""
    real = real_engine()
    task_id = task_id or ("hard_sigmoid_4d" if real else "fx_argmax")
    sample = sample_root(real) / task_id / "correct"
    files = {p.name: p.read_text() for p in sample.iterdir() if p.is_file()}
    with tempfile.TemporaryDirectory(prefix="mkb-sandboxcost-") as tmp_s:
        tmp = Path(tmp_s)
        path = write_config(tmp, real, task_id, tmp / "none")
        cfgs = {mode: load_config(path, ["--sandbox.mode", mode]) for mode in ("none", "bwrap")}
        task = next(t for t in load_suite(cfgs["none"].tasks.dir) if t.id == task_id)
        worker = setup_worker(cfgs["none"])
        wall: dict[str, list[float]] = {"none": [], "bwrap": []}
        statuses: set[str] = set()
        try:
            for i in range(repeats + 1):  # the first round warms both (ccache, native model)
                for mode, cfg in cfgs.items():
                    worker.cfg = cfg
                    for cached in ("settings", "timing"):  # the stage options (timing's too) follow the config
                        worker.__dict__.pop(cached, None)
                    job = Job(task, "bench", "correct", f"{mode}{i}", cfg.digest(), files=files)
                    t = time.monotonic()
                    rec = run_job(job, worker)
                    if i:
                        wall[mode].append(time.monotonic() - t)
                    statuses.add(f"{mode}: {rec.status.value} (sandboxed {rec.sandboxed})")
        finally:
            worker.workspace.release()
    med = {m: statistics.median(v) for m, v in wall.items()}
    print(f"engine: {'MNN ' + cfgs['none'].mnn.version if real else 'fixture'}; task {task_id}; {repeats} "
          f"interleaved repeats; records: {sorted(statuses)}")
    print(f"per candidate: rlimits only {med['none']:.2f} s, sandboxed {med['bwrap']:.2f} s; ratio "
          f"{med['bwrap'] / med['none']:.3f} (target <= 1.10), added {med['bwrap'] - med['none']:+.2f} s")
    return 0
