"""Benchmarks (``nox -s bench``): ratios measured side by side in one run; nothing here is a test.

1. **overhead**: wall time of the kit evaluating one candidate (``run_job`` in a warm worker) vs the raw steps
   it wraps, run directly (copy files in, ninja, MNNConvert, runner verify trials, runner timing rounds on both
   sides, copy files back, ninja).  Interleaved A B A B; prints the ratio of medians (target <= 1.2).
2. **resume setup**: wall time of a second ``mkb eval`` of a config whose jobs are all recorded (target <= 10 s,
   no MNN rebuild).
3. **scaling** (``--scaling``): the sample set, repeated under ``--copies`` method names, evaluated serially (no
   Ray, the loop of ``mkb eval`` with ``dispatch.mode = "serial"``), over Ray with 1 worker and over Ray with 2
   workers, each into a fresh run directory after a warm-up run (native baseline, both workspaces, ccache).
   The three modes run in ``--rounds`` interleaved rounds, the order rotated each round (S 1 2, 1 2 S, 2 S 1) so
   a drift of the host's speed hits every mode alike; each ratio is computed within a round (adjacent runs)
   and the median over rounds is quoted with its range, the table shows each figure's median over rounds.
   Each mode is timed in parts: the fixed start (serial: ``setup_worker``; Ray: ``ray.init`` + the first worker
   ready), the steady work (serial: the job loop ``run_jobs``; Ray: ``work_s`` of ``run_distributed``, first
   worker ready to last record) and the stop.  Prints, side by side: the fixed starts, steady throughput,
   scaling efficiency = throughput(2) / (2 * throughput(1)), Ray's overhead per job = (Ray 1 worker work_s -
   serial work_s) / jobs (also in % of the serial time per job), the bound the node-exclusive timing lock puts
   on the efficiency, the time per job spent waiting for that lock (every worker's gate is a :class:`TimedGate`),
   the seconds builds were paused for the other worker's timing, the host's CPU load, and the end-to-end
   figures.  Every worker builds with ``ninja -j1`` (``--one-worker-jobs J`` gives the serial and 1-worker runs
   J jobs instead, e.g. all CPUs: the best one worker does alone, a stricter baseline than per-worker scaling).
   Run it on a quiet host (it warns when the host is busy before it starts).

Engine: the real MNN tree when ``MKB_MNN__SOURCE_DIR`` is set (task ``--task``, sample from
``candidates/sample``), else the fixture engine shipped with the tests.

    python -m kit.bench [--task ID] [--sample correct] [--repeats 3]
    python -m kit.bench --scaling [--rounds R] [--copies N] [--one-worker-jobs J]   (Ray needs loopback networking)
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit import proc
from kit.config import EvalConfig, load_config
from kit.evaluate import evaluate, make_jobs, run_jobs, setup_worker
from kit.gate import NodeGate
from kit.inputs import make_inputs
from kit.mnn import build as mbuild
from kit.mnn import runner as mrunner
from kit.mnn.native import workspace_lib_dir
from kit.mnn.source import ensure_pristine
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
    ap.add_argument("--copies", type=int, default=None, help="scaling: evaluate the sample set under this many "
                    "method names (default: 8 on the fixture engine, 1 on real MNN)")
    ap.add_argument("--one-worker-jobs", type=int, default=1, help="scaling: ninja -j of the serial and "
                    "1-worker runs (default 1, as each of the 2 workers: per-worker scaling)")
    ap.add_argument("--rounds", type=int, default=None, help="scaling: interleaved rounds of the three modes "
                    "(default: 3 on the fixture engine, 2 on real MNN)")
    args = ap.parse_args(argv)
    if args.scaling:
        return scaling(args.copies, args.one_worker_jobs, args.rounds)
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


def stamped_setup(cfg: EvalConfig, index: int, name: str) -> Any:
    """:func:`kit.dispatch.default_setup`, then the worker's ready time (``time.monotonic()`` seconds; the clock
    is system-wide on Linux, so comparable with the driver's on this host) and the host's CPU counters
    (:func:`_cpu_jiffies`) written to ``<run.dir>/bench-ready/w<index>``; the worker's gate becomes a
    :class:`TimedGate` reporting to ``<run.dir>/bench-gate/w<index>.json``.  The scaling benchmark's Ray runs use
    it to split the fixed start from the work and to see the lock waits."""
    from kit.dispatch import default_setup

    state = default_setup(cfg, index, name)
    _instrument(state, cfg.run.dir / "bench-gate" / f"w{index}.json")
    stamps = cfg.run.dir / "bench-ready"
    stamps.mkdir(parents=True, exist_ok=True)
    busy, total = _cpu_jiffies()
    (stamps / f"w{index}").write_text(f"{time.monotonic()!r} {busy} {total}")
    return state


class TimedGate(NodeGate):
    """A :class:`kit.gate.NodeGate` (same lock file, same locking) that sums, per mode (``shared``: builds and
    verification; ``exclusive``: timing phases), the seconds spent waiting for the lock (``wait_s``) and holding
    it (``held_s``; a shared hold includes the seconds its commands were paused for a timing phase, summed in
    ``paused_s``).  With ``report`` set, the sums are rewritten there (JSON) after each hold, so a Ray actor's
    figures can be read by the driver; the serial run writes them too, so both carry the same cost."""

    def __init__(self, path: Path, report: Path | None = None) -> None:
        super().__init__(path)
        self.report = report
        self.wait_s = {"shared": 0.0, "exclusive": 0.0}
        self.held_s = {"shared": 0.0, "exclusive": 0.0}

    @contextmanager
    def _timed(self, kind: str, hold: Any) -> Iterator[None]:
        t0 = time.monotonic()
        with hold:
            t1 = time.monotonic()
            try:
                yield
            finally:
                t2 = time.monotonic()
        self.wait_s[kind] += t1 - t0
        self.held_s[kind] += t2 - t1
        if self.report is not None:
            self.report.write_text(json.dumps({"wait_s": self.wait_s, "held_s": self.held_s, "paused_s": self.paused_s}))

    def shared(self):
        return self._timed("shared", super().shared())

    def exclusive(self):
        return self._timed("exclusive", super().exclusive())


def _instrument(worker: Any, report: Path) -> None:
    """Give ``worker`` (a :class:`kit.pipeline.Worker`) a :class:`TimedGate` on its gate's lock file."""
    if getattr(worker, "gate", None) is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        worker.gate = TimedGate(worker.gate.path, report)


@dataclass
class ModeRun:
    """One measured run of the scaling benchmark (all times in seconds of wall clock)."""

    label: str
    workers: int
    build_jobs: int
    #: serial: ``setup_worker``; Ray: ``ray.init`` (``connect``)
    init_s: float = 0.0
    #: Ray only: from calling ``run_distributed`` to the first worker ready
    ready_s: float = 0.0
    #: Ray only: seconds the last worker became ready after the first (it works from then on)
    stagger_s: float = 0.0
    #: the job loop: serial ``run_jobs``; Ray ``work_s`` of ``run_distributed`` (first ready to last record)
    work_s: float = 0.0
    #: after the last record: serial workspace release; Ray actors closed and ``ray.shutdown``
    stop_s: float = 0.0
    #: summed over the workers' :class:`TimedGate`: seconds waiting for / holding the node lock, per mode
    wait_s: dict[str, float] = field(default_factory=lambda: {"shared": 0.0, "exclusive": 0.0})
    held_s: dict[str, float] = field(default_factory=lambda: {"shared": 0.0, "exclusive": 0.0})
    #: summed over the workers: seconds their builds/verifications were paused for a timing phase
    paused_s: float = 0.0
    #: fraction of the host's CPU time busy during the work (Ray: first worker ready to run_distributed's return)
    cpu_busy: float = float("nan")
    n: int = 0
    #: sum of the records' ``wall_s`` (each job's time inside its worker) and ``build_s``
    job_wall_s: float = 0.0
    build_s: float = 0.0
    statuses: dict[str, int] = field(default_factory=dict)

    @property
    def start_s(self) -> float:
        return self.init_s + self.ready_s

    @property
    def total_s(self) -> float:
        return self.start_s + self.work_s + self.stop_s

    @property
    def jobs_per_s(self) -> float:
        return self.n / self.work_s

    @property
    def per_job_ms(self) -> float:
        return 1000 * self.work_s / self.n


def _tally(m: ModeRun, run_dir: Path) -> ModeRun:
    from kit.shards import read_records

    frame = read_records(run_dir)
    m.n = frame.height
    m.job_wall_s = float(frame["wall_s"].fill_null(0.0).sum())
    m.build_s = float(frame["build_s"].fill_null(0.0).sum())
    m.statuses = {k: v for k, v in sorted(collections.Counter(frame["status"].to_list()).items())}
    for report in sorted((run_dir / "bench-gate").glob("*.json")):
        d = json.loads(report.read_text())
        for kind in ("shared", "exclusive"):
            m.wait_s[kind] += d["wait_s"][kind]
            m.held_s[kind] += d["held_s"][kind]
        m.paused_s += d["paused_s"]
    return m


def run_serial(cfg: EvalConfig, jobs: list[Job], label: str) -> ModeRun:
    """What ``evaluate`` does with ``dispatch.mode = "serial"``, timed in parts: ``setup_worker``, then the job
    loop (``run_jobs``, shards written as in ``mkb eval``), then the workspace release.  The worker's gate is a
    :class:`TimedGate` (same lock file, same locking) as in the Ray runs."""
    m = ModeRun(label, 1, cfg.build.jobs)
    t = time.monotonic()
    worker = setup_worker(cfg)
    _instrument(worker, cfg.run.dir / "bench-gate" / "w0.json")
    m.init_s = time.monotonic() - t
    try:
        t, cpu = time.monotonic(), _cpu_jiffies()
        run_jobs(jobs, worker, cfg.run.dir, label=label)
        m.work_s = time.monotonic() - t
        m.cpu_busy = _busy(cpu, _cpu_jiffies())
    finally:
        t = time.monotonic()
        worker.workspace.release()
        m.stop_s = time.monotonic() - t
    return _tally(m, cfg.run.dir)


def run_ray(cfg: EvalConfig, jobs: list[Job], label: str) -> ModeRun:
    """``run_distributed`` on an embedded local Ray, as ``mkb eval`` runs it, timed in parts: ``ray.init``,
    start to the first worker ready (stamped by :func:`stamped_setup`), ``work_s``, then close + shutdown."""
    import ray

    # ``python -m kit.bench`` runs as __main__; Ray pickles kit.bench.stamped_setup by reference
    from kit import bench as this
    from kit.dispatch import connect, run_distributed

    m = ModeRun(label, cfg.dispatch.workers, cfg.build.jobs)
    t = time.monotonic()
    connect(cfg)
    m.init_s = time.monotonic() - t
    try:
        t_call = time.monotonic()
        res = run_distributed(cfg, jobs, cfg.run.dir, setup_fn=this.stamped_setup)
        cpu_back = _cpu_jiffies()
    finally:
        ray.shutdown()
    t_end = time.monotonic()
    if res["workers"] != m.workers:
        raise RuntimeError(f"{label}: Ray started {res['workers']} worker(s), not {m.workers} (too few CPUs?)")
    stamps = sorted((p.read_text().split() for p in (cfg.run.dir / "bench-ready").iterdir()), key=lambda s: float(s[0]))
    first, last = float(stamps[0][0]), float(stamps[-1][0])
    m.ready_s = first - t_call
    m.stagger_s = last - first
    m.work_s = res["work_s"]
    # the last record came at about first ready + work_s; the rest is closing the actors and ray.shutdown
    m.stop_s = t_end - (first + m.work_s)
    m.cpu_busy = _busy((int(stamps[0][1]), int(stamps[0][2])), cpu_back)
    return _tally(m, cfg.run.dir)

def _cpu_jiffies() -> tuple[int, int]:
    """(busy, total) CPU time of the whole host since boot, in clock ticks (``/proc/stat``; (0, 0) elsewhere)."""
    try:
        f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return 0, 0
    return sum(f) - f[3] - f[4], sum(f)  # idle and iowait are not busy


def _busy(a: tuple[int, int], b: tuple[int, int]) -> float:
    return (b[0] - a[0]) / (b[1] - a[1]) if b[1] > a[1] else float("nan")


def _median_run(runs: list[ModeRun]) -> ModeRun:
    """A :class:`ModeRun` whose every figure is the median of ``runs``' (the same mode in each round)."""
    med = ModeRun(runs[0].label, runs[0].workers, runs[0].build_jobs, statuses=runs[0].statuses)
    for name in ("init_s", "ready_s", "stagger_s", "work_s", "stop_s", "paused_s", "cpu_busy", "job_wall_s",
                 "build_s"):
        setattr(med, name, statistics.median(getattr(r, name) for r in runs))
    for name in ("wait_s", "held_s"):
        setattr(med, name, {k: statistics.median(getattr(r, name)[k] for r in runs) for k in ("shared", "exclusive")})
    med.n = runs[0].n
    return med


def _spread(values: list[float], fmt: str = "{:.2f}") -> str:
    """``median (min-max over N rounds)``."""
    text = fmt.format(statistics.median(values))
    if len(values) > 1:
        text += f" ({fmt.format(min(values))}-{fmt.format(max(values))} over {len(values)} rounds)"
    return text


def scaling(copies: int | None = None, one_worker_jobs: int | None = 1, rounds: int | None = None) -> int:
    """Benchmark 3 (see module docstring)."""
    real = bool(os.environ.get("MKB_MNN__SOURCE_DIR"))
    cand_root = (ROOT / "candidates" / "sample") if real else (ROOT / "tests" / "fixture_engine" / "candidates" / "sample")
    copies = copies or (1 if real else 8)
    rounds = rounds or (2 if real else 3)
    with tempfile.TemporaryDirectory(prefix="mkb-scaling-") as tmp_s:
        tmp = Path(tmp_s)
        cfg_path = _config(tmp, real, "unused", cand_root)
        text = cfg_path.read_text().replace('ids = ["unused"]\n', "")
        # the sample set under `copies` method names: distinct job ids, the same work each time
        source = f'[[candidates.sources]]\nmethod = "bench"\npath = "{cand_root}"\n'
        assert source in text
        text = text.replace(source, "".join(source.replace('"bench"', f'"bench{k}"') for k in range(copies)))
        cfg_path.write_text(text + "\n[timing]\niterations = 50\nrounds = 2\n")
        base = load_config(cfg_path)
        one = one_worker_jobs or base.build.jobs

        def cfg_for(tag: str, mode: str, workers: int, build_jobs: int) -> EvalConfig:
            return load_config(cfg_path, ["--dispatch.mode", mode, "--dispatch.workers", str(workers),
                                          "--run.dir", str(tmp / tag), "--report.enabled", "false",
                                          "--build.jobs", str(build_jobs)])

        tasks = load_suite(base.tasks.dir, base.tasks.split)
        jobs, orphans = make_jobs(base, tasks, {t.id for t in load_suite(base.tasks.dir, "all")}, None)
        assert not orphans, [r.task_id for r in orphans]
        cpu, own = _cpu_jiffies(), os.times()
        time.sleep(2)
        cpu_after, own_after = _cpu_jiffies(), os.times()
        own_ticks = round((own_after.user + own_after.system - own.user - own.system) * os.sysconf("SC_CLK_TCK"))
        idle_busy = _busy((cpu[0] + own_ticks, cpu[1]), cpu_after)  # this process's own CPU time not counted
        # the pristine tree first, in the driver (on a fresh cache this copies the tree once; the actors then
        # find it, ensure_pristine is also safe when they start together)
        ensure_pristine(base)
        # warm-up: native baseline, workspaces w0 and w1, ccache and the native models, for every sample once
        run_ray(cfg_for("warm", "ray", 2, 1), [j for j in jobs if j.method == "bench0"], "warm-up")
        modes = {
            "serial": lambda r: run_serial(cfg_for(f"serial-{r}", "serial", 1, one), jobs, "serial"),
            "ray1": lambda r: run_ray(cfg_for(f"ray1-{r}", "ray", 1, one), jobs, "ray 1 worker"),
            "ray2": lambda r: run_ray(cfg_for(f"ray2-{r}", "ray", 2, 1), jobs, "ray 2 workers"),
        }
        names = list(modes)
        per: dict[str, list[ModeRun]] = {k: [] for k in names}
        for r in range(rounds):
            for k in names[r % 3:] + names[: r % 3]:  # rotated: each mode runs first, middle and last
                per[k].append(modes[k](r))
        serial, ray1, ray2 = (_median_run(per[k]) for k in names)
        runs = (serial, ray1, ray2)
        every = [m for k in names for m in per[k]]

        n = serial.n
        print()
        print(f"engine: {'MNN ' + base.mnn.version if real else 'fixture'}; {n} jobs = {n // copies} samples of "
              f"{cand_root.relative_to(ROOT)} x {copies} method names; timing {base.timing.rounds} rounds x "
              f"{base.timing.iterations} iterations; host: {os.cpu_count()} CPUs; {rounds} interleaved round(s) of "
              f"the three modes, figures below are medians over rounds")
        print(f"host CPU busy before the benchmark (2 s sample): {100 * idle_busy:.0f} %"
              + ("  WARNING: other load on the host distorts every figure below" if idle_busy > 0.1 else ""))
        print(f"ninja -j: {one} for serial and Ray 1 worker, 1 per worker for Ray 2 workers"
              + (" (-j1 everywhere: per-worker scaling)" if one == 1 else
                 f" (the 1-worker baseline has all {one} jobs: stricter than per-worker scaling)"))
        print(f"fixed start [s]: serial setup_worker {serial.init_s:.2f} | Ray 1 worker: ray.init {ray1.init_s:.2f}"
              f" + worker ready {ray1.ready_s:.2f} = {ray1.start_s:.2f} | Ray 2 workers: ray.init {ray2.init_s:.2f}"
              f" + first worker ready {ray2.ready_s:.2f} = {ray2.start_s:.2f} (second worker ready "
              f"{ray2.stagger_s:.2f} s later, counted in work_s)")
        print(f"fixed stop [s]:  serial {serial.stop_s:.2f} | Ray 1 worker {ray1.stop_s:.2f} | Ray 2 workers "
              f"{ray2.stop_s:.2f} (close actors + ray.shutdown)")
        rows = [
            ("work_s: the job loop [s]", lambda m: f"{m.work_s:.1f}"),
            ("steady throughput [jobs/s]", lambda m: f"{m.jobs_per_s:.3f}"),
            ("steady time per job [ms]", lambda m: f"{m.per_job_ms:.0f}"),
            ("mean job wall_s in its worker [ms]", lambda m: f"{1000 * m.job_wall_s / m.n:.0f}"),
            ("  of which build_s [ms]", lambda m: f"{1000 * m.build_s / m.n:.0f}"),
            ("  timing, lock held [ms]", lambda m: f"{1000 * m.held_s['exclusive'] / m.n:.0f}"),
            ("  waiting for the lock to time [ms]", lambda m: f"{1000 * m.wait_s['exclusive'] / m.n:.0f}"),
            ("  waiting for the lock to build/verify [ms]", lambda m: f"{1000 * m.wait_s['shared'] / m.n:.0f}"),
            ("  build/verify paused for timing [ms]", lambda m: f"{1000 * m.paused_s / m.n:.0f}"),
            ("host CPU busy during the work [%]", lambda m: f"{100 * m.cpu_busy:.0f}"),
            ("end to end: start + work + stop [s]", lambda m: f"{m.total_s:.1f}"),
            ("end-to-end throughput [jobs/s]", lambda m: f"{m.n / m.total_s:.3f}"),
        ]
        print(f"{'':44}" + "".join(f"{m.label:>15}" for m in runs))
        for name, fmt in rows:
            print(f"{name:44}" + "".join(f"{fmt(m):>15}" for m in runs))
        if len({tuple(m.statuses.items()) for m in every}) > 1 or len({m.n for m in every}) > 1:
            print("WARNING: the runs' records differ: " + "; ".join(f"{m.label} {m.statuses}" for m in every))
        else:
            print(f"records (same in every run): {serial.statuses}")

        effs = [b.jobs_per_s / (2 * a.jobs_per_s) for a, b in zip(per["ray1"], per["ray2"])]
        effs_e2e = [a.total_s / (2 * b.total_s) for a, b in zip(per["ray1"], per["ray2"])]
        x = serial.held_s["exclusive"] / n  # seconds per job inside the node-exclusive timing lock
        p = serial.work_s / n - x
        print(f"scaling efficiency 1 -> 2 workers, steady: {_spread(effs)} (target >= 0.9); end to end: "
              f"{_spread(effs_e2e)}")
        print(f"  bound from the node-exclusive timing lock alone: timing phases take {1000 * x:.0f} of "
              f"{1000 * (x + p):.0f} ms of a serial job ({100 * x / (x + p):.0f} %), nothing else runs meanwhile, "
              f"so efficiency <= (X+P)/(2X+P) = {(x + p) / (2 * x + p):.2f}")
        w1, w2 = ray1.job_wall_s / n, ray2.job_wall_s / n
        waits = (sum(ray2.wait_s.values()) - sum(ray1.wait_s.values())) / n
        paused = (ray2.paused_s - ray1.paused_s) / n
        print(f"  2 workers: a job takes {1000 * w2:.0f} ms in its worker vs {1000 * w1:.0f} ms alone: "
              f"{1000 * waits:+.0f} ms waiting for the node lock (timing waits for the other worker's Python steps "
              f"between commands; builds wait while the other times), {1000 * paused:+.0f} ms with its build or "
              f"verification paused for the other's timing, {1000 * (w2 - w1 - waits - paused):+.0f} ms slower "
              f"steps (two jobs and Ray on {os.cpu_count()} CPUs, {100 * ray2.cpu_busy:.0f} % busy"
              + (f"; ninja -j1 instead of -j{one}: build_s {1000 * (ray2.build_s - ray1.build_s) / n:+.0f} ms)"
                 if one > 1 else ")"))
        over = [(b.work_s - a.work_s) / n for a, b in zip(per["serial"], per["ray1"])]
        over_pct = [100 * o / (a.work_s / n) for o, a in zip(over, per["serial"])]
        over_e2e = [(b.total_s - a.total_s) / n for a, b in zip(per["serial"], per["ray1"])]
        inside = statistics.median((b.job_wall_s - a.job_wall_s) / n for a, b in zip(per["serial"], per["ray1"]))
        print(f"Ray overhead per job vs serial, steady: {_spread([1000 * o for o in over], '{:.1f}')} ms = "
              f"{_spread(over_pct, '{:.1f}')} % of the serial time per job (target <= 5 %); end to end: "
              f"{_spread([1000 * o for o in over_e2e], '{:.0f}')} ms (fixed start included)")
        print(f"  of which the job itself ran longer in the actor: {1000 * inside:.1f} ms; dispatch and record "
              f"handling: {1000 * (statistics.median(over) - inside):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
