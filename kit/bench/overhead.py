"""Benchmarks 1 and 2: the kit's overhead on one candidate vs the raw steps it wraps, and the setup time of a
resumed ``mkb eval`` whose jobs are all recorded (see :mod:`kit.bench`)."""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from kit.bench.common import real_engine, sample_root, write_config
from kit.host import proc
from kit.job.pipeline import run_job
from kit.job.record import Job
from kit.job.worker import setup_worker
from kit.mnn import build as mbuild
from kit.mnn import convert as mconvert
from kit.mnn import runner as mrunner
from kit.mnn import targets
from kit.mnn.native import workspace_lib_dir
from kit.outline.evaluate import evaluate
from kit.settings.config import EvalConfig, load_config
from kit.suite.inputs import make_inputs
from kit.suite.tasks import load_suite


def raw_steps(cfg: EvalConfig, worker, task, files: dict[str, str], scratch: Path) -> float:
    """The same work as one job, as bare commands; returns wall seconds."""
    t0 = time.monotonic()
    ws = worker.workspace
    env = mbuild.build_env(cfg.mnn.cache_dir, ws.root)
    saved = {}
    for name, text in files.items():
        rel = task.place(name)
        dest = ws.src / rel
        saved[rel] = dest.read_bytes() if dest.exists() else None
        dest.unlink(missing_ok=True)
        dest.write_text(text)
    # what the kit builds for it (kit.mnn.targets); the tree is settled after each path, no converter is stale
    goals = targets.candidate_targets(cfg.mnn.engine, worker.settings.build.target,
                                      targets.changes_converter(saved), converter_stale=False)
    proc.run(["ninja", "-j", str(cfg.build.jobs), *goals], cwd=ws.build, env=env)
    lib = workspace_lib_dir(ws)
    model = scratch / "m.mnn"
    mconvert.convert(ws.build / "MNNConvert", task.onnx_path, model, env=mrunner.runner_env(lib))
    outs = [o.name for o in task.outputs]
    verify = mrunner.RunSettings(threads=cfg.timing.threads, precision=cfg.timing.precision, timeout_s=60)
    for k in range(cfg.verify.trials):
        mrunner.run_model(worker.native.runner, model, make_inputs(task, k), outs, lib, verify, scratch=scratch / f"v{k}")
    native_model = worker.native_models.model(task)
    timed = replace(verify, warmup=cfg.timing.warmup, iterations=cfg.timing.iterations,
                    op_types=tuple(task.mnn_op_types), timeout_s=300)
    for r in range(cfg.timing.rounds_max):  # the most an adaptive timing runs
        for m, d in ((native_model, worker.native.lib_dir), (model, lib)):
            if m is not None:
                mrunner.run_model(worker.native.runner, m, make_inputs(task, 0), outs, d, timed, scratch=scratch / f"t{r}")
    for rel, data in saved.items():
        dest = ws.src / rel
        dest.unlink(missing_ok=True)
        if data is not None:
            dest.write_bytes(data)
    proc.run(["ninja", "-j", str(cfg.build.jobs), *_settled(cfg, worker)], cwd=ws.build, env=env)
    return time.monotonic() - t0


def _settled(cfg: EvalConfig, worker) -> list[str]:
    """The targets that bring the restored tree back to built: everything the kit uses (no tool executable)."""
    return targets.native_targets(cfg.mnn.engine, worker.settings.build.target)


def overhead(task_id: str | None, sample: str, repeats: int) -> int:
    """Benchmarks 1 and 2 (see :mod:`kit.bench`)."""
    real = real_engine()
    cand_root = sample_root(real)
    task_id = task_id or ("fx_argmax" if not real else sorted(p.name for p in cand_root.iterdir() if "argmax" in p.name)[0])
    sample_dir = cand_root / task_id / sample
    files = {p.name: p.read_text() for p in sample_dir.iterdir() if p.is_file()}
    with tempfile.TemporaryDirectory(prefix="mkb-bench-") as tmp_s:
        tmp = Path(tmp_s)
        cands = tmp / "cands"
        shutil.copytree(sample_dir, cands / task_id / sample)
        cfg_path = write_config(tmp, real, task_id, cands)
        cfg = load_config(cfg_path)
        task = next(t for t in load_suite(cfg.tasks.dir) if t.id == task_id)
        print(f"engine: {'MNN ' + cfg.mnn.version if real else 'fixture'}; task {task_id}, sample {sample}")
        t0 = time.monotonic()
        worker = setup_worker(cfg)
        print(f"setup (pristine, native baseline, workspace): {time.monotonic() - t0:.1f} s")
        kit_s, raw_s = [], []
        try:
            # warm both paths once (first ninja after setup, native model conversion)
            raw_steps(cfg, worker, task, files, tmp / "warm")
            for i in range(repeats):
                job = Job(task, "bench", f"{sample}", f"bench{i}", cfg.digest(), files=files)
                t = time.monotonic()
                rec = run_job(job, worker)
                # the kit restores lazily (the next job's build recompiles the restored files): settle it here
                # so both paths end with a clean, built tree
                proc.run(["ninja", "-j", str(cfg.build.jobs), *_settled(cfg, worker)], cwd=worker.workspace.build,
                         env=mbuild.build_env(cfg.mnn.cache_dir, worker.workspace.root))
                kit_s.append(time.monotonic() - t)
                raw_s.append(raw_steps(cfg, worker, task, files, tmp / f"raw{i}"))
                print(f"  round {i}: kit {kit_s[-1]:.2f} s ({rec.status.value}), raw {raw_s[-1]:.2f} s")
        finally:
            worker.workspace.release()
        ratio = statistics.median(kit_s) / statistics.median(raw_s)
        print(f"overhead: kit / raw steps = {ratio:.3f} (median {statistics.median(kit_s):.2f} s vs "
              f"{statistics.median(raw_s):.2f} s; target <= 1.2)")
        # resume: every job is recorded after this first eval; the second one must only plan and exit
        evaluate(cfg)
        t = time.monotonic()
        evaluate(cfg)
        setup = time.monotonic() - t
        print(f"second `mkb eval` of the same config (all jobs recorded): {setup:.2f} s (target <= 10 s)")
    return 0


