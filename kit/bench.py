"""Benchmarks (``nox -s bench``): ratios measured side by side in one run; nothing here is a test.

1. **overhead**: wall time of the kit evaluating one candidate (``run_job`` in a warm worker) vs the raw steps
   it wraps, run directly (copy files in, ninja, MNNConvert, runner verify trials, runner timing rounds on both
   sides, copy files back, ninja).  Interleaved A B A B; prints the ratio of medians (target <= 1.2).
2. **resume setup**: wall time of a second ``mkb eval`` of a config whose jobs are all recorded (target <= 10 s,
   no MNN rebuild).
3. **scaling** (``--scaling``): the whole sample set evaluated serially (no Ray), over Ray with 1 worker and over
   Ray with 2 workers, each into a fresh run directory with warm workspaces; prints throughput, the scaling
   efficiency (T1 / (2 * T2)) and Ray's overhead per job against the serial path.

Engine: the real MNN tree when ``MKB_MNN__SOURCE_DIR`` is set (task ``--task``, sample from
``candidates/sample``), else the fixture engine shipped with the tests.

    python -m kit.bench [--task ID] [--sample correct] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kit import proc
from kit.config import EvalConfig, load_config
from kit.evaluate import evaluate, setup_worker
from kit.inputs import make_inputs
from kit.mnn import build as mbuild
from kit.mnn import runner as mrunner
from kit.mnn.native import workspace_lib_dir
from kit.pipeline import Job, run_job
from kit.tasks import load_suite

ROOT = Path(__file__).resolve().parent.parent


def _config(tmp: Path, real: bool, task_id: str, cands: Path) -> Path:
    if real:
        src = os.environ["MKB_MNN__SOURCE_DIR"]
        engine, tasks_dir = "mnn", ROOT / "tasks"
        cache = os.environ.get("MKB_MNN__CACHE_DIR", str(Path.home() / ".cache" / "mkb"))
    else:
        src = str(ROOT / "tests" / "fixture_engine")
        engine, tasks_dir = "fixture", ROOT / "tests" / "fixture_engine" / "tasks"
        cache = str(tmp / "cache")
    p = tmp / "bench.toml"
    p.write_text(
        f"""
[run]
dir = "{tmp / 'run'}"
[tasks]
dir = "{tasks_dir}"
split = "all"
ids = ["{task_id}"]
[[candidates.sources]]
method = "bench"
path = "{cands}"
[mnn]
engine = "{engine}"
source_dir = "{src}"
cache_dir = "{cache}"
"""
    )
    return p


def raw_steps(cfg: EvalConfig, worker, task, files: dict[str, str], scratch: Path) -> float:
    """The same work as one job, as bare commands; returns wall seconds."""
    t0 = time.monotonic()
    ws = worker.workspace
    env = mbuild.build_env(cfg, ws.root)
    saved = {}
    for name, text in files.items():
        rel = task.place(name)
        dest = ws.src / rel
        saved[rel] = dest.read_bytes() if dest.exists() else None
        dest.unlink(missing_ok=True)
        dest.write_text(text)
    proc.run(["ninja", "-j", str(cfg.build.jobs)], cwd=ws.build, env=env)
    lib = workspace_lib_dir(ws)
    model = scratch / "m.mnn"
    mrunner.convert(ws.build / "MNNConvert", task.onnx_path, model, env=mrunner.runner_env(lib))
    outs = [o.name for o in task.outputs]
    for k in range(cfg.verify.trials):
        mrunner.run_model(worker.native.runner, model, make_inputs(task, k), outs, lib, threads=cfg.timing.threads,
                          precision=cfg.timing.precision, timeout_s=60, scratch=scratch / f"v{k}")
    native_model = worker.native_model(task)
    for r in range(cfg.timing.rounds):
        for m, d in ((native_model, worker.native.lib_dir), (model, lib)):
            if m is None:
                continue
            mrunner.run_model(worker.native.runner, m, make_inputs(task, 0), outs, d, threads=cfg.timing.threads,
                              precision=cfg.timing.precision, warmup=cfg.timing.warmup,
                              iterations=cfg.timing.iterations, op_types=tuple(task.mnn_op_types), timeout_s=300,
                              scratch=scratch / f"t{r}")
    for rel, data in saved.items():
        dest = ws.src / rel
        dest.unlink(missing_ok=True)
        if data is not None:
            dest.write_bytes(data)
    proc.run(["ninja", "-j", str(cfg.build.jobs)], cwd=ws.build, env=env)
    return time.monotonic() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kit.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default=None, help="task id (default: fx_argmax on the fixture engine, "
                    "the sample set's ArgMax task on real MNN)")
    ap.add_argument("--sample", default="correct")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scaling", action="store_true", help="run the 1-vs-2-worker scaling benchmark instead")
    args = ap.parse_args(argv)
    if args.scaling:
        return scaling()
    real = bool(os.environ.get("MKB_MNN__SOURCE_DIR"))
    cand_root = (ROOT / "candidates" / "sample") if real else (ROOT / "tests" / "fixture_engine" / "candidates" / "sample")
    task_id = args.task or ("fx_argmax" if not real else sorted(p.name for p in cand_root.iterdir() if "argmax" in p.name)[0])
    sample_dir = cand_root / task_id / args.sample
    files = {p.name: p.read_text() for p in sample_dir.iterdir() if p.is_file()}
    with tempfile.TemporaryDirectory(prefix="mkb-bench-") as tmp_s:
        tmp = Path(tmp_s)
        cands = tmp / "cands"
        shutil.copytree(sample_dir, cands / task_id / args.sample)
        cfg_path = _config(tmp, real, task_id, cands)
        cfg = load_config(cfg_path)
        task = next(t for t in load_suite(cfg.tasks.dir) if t.id == task_id)
        print(f"engine: {'MNN ' + cfg.mnn.version if real else 'fixture'}; task {task_id}, sample {args.sample}")
        t0 = time.monotonic()
        worker = setup_worker(cfg)
        print(f"setup (pristine, native baseline, workspace): {time.monotonic() - t0:.1f} s")
        kit_s, raw_s = [], []
        try:
            # warm both paths once (first ninja after setup, native model conversion)
            raw_steps(cfg, worker, task, files, tmp / "warm")
            for i in range(args.repeats):
                job = Job(task, "bench", f"{args.sample}", f"bench{i}", cfg.digest(), files=files)
                t = time.monotonic()
                rec = run_job(job, worker)
                # the kit restores lazily (the next job's build recompiles the restored files): settle it here
                # so both paths end with a clean, built tree
                proc.run(["ninja", "-j", str(cfg.build.jobs)], cwd=worker.workspace.build,
                         env=mbuild.build_env(cfg, worker.workspace.root))
                kit_s.append(time.monotonic() - t)
                raw_s.append(raw_steps(cfg, worker, task, files, tmp / f"raw{i}"))
                print(f"  round {i}: kit {kit_s[-1]:.2f} s ({rec.status.value}), raw {raw_s[-1]:.2f} s")
        finally:
            worker.workspace.release()
        ratio = statistics.median(kit_s) / statistics.median(raw_s)
        print(f"overhead: kit / raw steps = {ratio:.3f} (median {statistics.median(kit_s):.2f} s vs "
              f"{statistics.median(raw_s):.2f} s; target <= 1.2)")
        # resume: every job is recorded after this first eval; the second one must only set up and exit
        evaluate(cfg)
        t = time.monotonic()
        evaluate(cfg)
        setup = time.monotonic() - t
        print(f"second `mkb eval` of the same config (all jobs recorded): {setup:.2f} s (target <= 10 s)")
    return 0


def scaling() -> int:
    """Benchmark 3 (see module docstring)."""
    real = bool(os.environ.get("MKB_MNN__SOURCE_DIR"))
    cand_root = (ROOT / "candidates" / "sample") if real else (ROOT / "tests" / "fixture_engine" / "candidates" / "sample")
    with tempfile.TemporaryDirectory(prefix="mkb-scaling-") as tmp_s:
        tmp = Path(tmp_s)
        cfg_path = _config(tmp, real, "unused", cand_root)
        text = cfg_path.read_text().replace('ids = ["unused"]\n', "")
        cfg_path.write_text(text + "\n[timing]\niterations = 50\nrounds = 2\n")
        base = load_config(cfg_path)
        from kit.dispatch import worker_count  # noqa: F401 - the only module importing ray

        def run(mode: str, workers: int, tag: str) -> float:
            cfg = load_config(cfg_path, ["--dispatch.mode", mode, "--dispatch.workers", str(workers),
                                         "--run.dir", str(tmp / tag), "--report.enabled", "false",
                                         "--build.jobs", "1" if workers > 1 else str(base.build.jobs)])
            t = time.monotonic()
            evaluate(cfg)
            return time.monotonic() - t

        run("ray", 2, "warm")  # builds the native baseline and both workspaces
        serial = run("serial", 1, "serial")
        ray1 = run("ray", 1, "ray1")
        ray2 = run("ray", 2, "ray2")
        from kit.shards import scan

        n = scan(tmp / "serial").collect().height
        print(f"jobs: {n}")
        print(f"serial (no Ray), 1 worker: {serial:.1f} s  ({n / serial:.2f} jobs/s)")
        print(f"Ray, 1 worker:             {ray1:.1f} s  ({n / ray1:.2f} jobs/s)")
        print(f"Ray, 2 workers:            {ray2:.1f} s  ({n / ray2:.2f} jobs/s)")
        print(f"scaling efficiency 1 -> 2 workers: {ray1 / (2 * ray2):.2f} (target >= 0.9)")
        print(f"Ray overhead per job vs serial: {(ray1 - serial) / n:.2f} s ({100 * (ray1 - serial) / serial:.1f} %, target <= 5 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
