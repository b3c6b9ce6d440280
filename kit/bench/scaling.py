"""Benchmark 3 (``--scaling``): serial vs Ray with 1 worker vs Ray with 2 workers, in interleaved rounds (see
:mod:`kit.bench`)."""

from __future__ import annotations

import collections
import json
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.bench.common import ROOT, real_engine, sample_root, write_config
from kit.host.nodelock import NodeLock
from kit.job.record import Job
from kit.job.worker import setup_worker
from kit.mnn.source import ensure_pristine
from kit.outline.evaluate import execute
from kit.run.plan import make_jobs
from kit.run.serial_executor import SerialExecutor
from kit.settings.config import EvalConfig, load_config
from kit.suite.tasks import load_suite


def stamped_setup(cfg: EvalConfig, index: int, name: str) -> Any:
    """:func:`kit.job.worker.setup_worker`, then the worker's ready time (``time.monotonic()`` seconds; the clock
    is system-wide on Linux, so comparable with the driver's on this host) and the host's CPU counters
    (:func:`_cpu_jiffies`) written to ``<run.dir>/bench-ready/w<index>``; the worker's gate becomes a
    :class:`TimedGate` reporting to ``<run.dir>/bench-gate/w<index>.json``.  The scaling benchmark's Ray runs use
    it to split the fixed start from the work and to see the lock waits."""
    state = setup_worker(cfg, index, name)
    _instrument(state, cfg.run.dir / "bench-gate" / f"w{index}.json")
    stamps = cfg.run.dir / "bench-ready"
    stamps.mkdir(parents=True, exist_ok=True)
    busy, total = _cpu_jiffies()
    (stamps / f"w{index}").write_text(f"{time.monotonic()!r} {busy} {total}")
    return state


class TimedGate(NodeLock):
    """A :class:`kit.host.nodelock.NodeLock` (same lock file, same locking) that sums, per mode (``shared``: builds and
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
    """Give ``worker`` (a :class:`kit.job.worker.Worker`) a :class:`TimedGate` on its gate's lock file."""
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
    #: Ray only: from calling ``execute`` to the first worker ready
    ready_s: float = 0.0
    #: Ray only: seconds the last worker became ready after the first (it works from then on)
    stagger_s: float = 0.0
    #: the job loop: ``work_s`` of the executor (first worker ready to last record)
    work_s: float = 0.0
    #: after the last record: serial workspace release; Ray actors closed and ``ray.shutdown``
    stop_s: float = 0.0
    #: summed over the workers' :class:`TimedGate`: seconds waiting for / holding the node lock, per mode
    wait_s: dict[str, float] = field(default_factory=lambda: {"shared": 0.0, "exclusive": 0.0})
    held_s: dict[str, float] = field(default_factory=lambda: {"shared": 0.0, "exclusive": 0.0})
    #: summed over the workers: seconds their builds/verifications were paused for a timing phase
    paused_s: float = 0.0
    #: fraction of the host's CPU time busy during the work (Ray: first worker ready to the return of ``execute``)
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
    from kit.results.shards import read_records

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
    """What ``mkb eval`` does with ``dispatch.mode = "serial"`` (:func:`kit.outline.evaluate.execute` on a
    :class:`~kit.run.serial_executor.SerialExecutor`, shards written as in ``mkb eval``), timed in parts: ``setup_worker``,
    then the job loop, then the rest (workspace release).  The worker's gate is a :class:`TimedGate` (same lock
    file, same locking) as in the Ray runs."""
    m = ModeRun(label, 1, cfg.build.jobs)
    cpu: list[tuple[int, int]] = []

    def timed_setup(c: EvalConfig) -> Any:
        t = time.monotonic()
        worker = setup_worker(c)
        _instrument(worker, c.run.dir / "bench-gate" / "w0.json")
        m.init_s = time.monotonic() - t
        cpu.append(_cpu_jiffies())
        return worker

    t0 = time.monotonic()
    res = execute(jobs, set(), cfg.run.dir, SerialExecutor(cfg, setup=timed_setup), label=label)
    m.cpu_busy = _busy(cpu[0], _cpu_jiffies())
    m.work_s = res.work_s
    m.stop_s = time.monotonic() - t0 - m.init_s - m.work_s
    return _tally(m, cfg.run.dir)


def run_ray(cfg: EvalConfig, jobs: list[Job], label: str) -> ModeRun:
    """:func:`kit.outline.evaluate.execute` on a :class:`~kit.dispatch.RayExecutor` (embedded local Ray), as ``mkb eval``
    runs it, timed in parts: ``ray.init``, start to the first worker ready (stamped by :func:`stamped_setup`),
    ``work_s``, then close + shutdown."""
    from kit.dispatch import RayExecutor  # imports Ray

    m = ModeRun(label, cfg.dispatch.workers, cfg.build.jobs)
    executor = RayExecutor(cfg, setup_fn=stamped_setup)
    t = time.monotonic()
    executor.__enter__()  # ray.init; execute's own `with` inside leaves it connected
    m.init_s = time.monotonic() - t
    try:
        t_call = time.monotonic()
        res = execute(jobs, set(), cfg.run.dir, executor, label=label)
        cpu_back = _cpu_jiffies()
    finally:
        executor.__exit__(None, None, None)
    t_end = time.monotonic()
    if res.workers != m.workers:
        raise RuntimeError(f"{label}: Ray started {res.workers} worker(s), not {m.workers} (too few CPUs?)")
    stamps = sorted((p.read_text().split() for p in (cfg.run.dir / "bench-ready").iterdir()), key=lambda s: float(s[0]))
    first, last = float(stamps[0][0]), float(stamps[-1][0])
    m.ready_s = first - t_call
    m.stagger_s = last - first
    m.work_s = res.work_s
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


@dataclass
class _Setup:
    """The scaling benchmark's inputs: the config file, the jobs (the sample set under ``copies`` method names),
    the host's CPU load before it started."""

    tmp: Path
    cfg_path: Path
    base: EvalConfig
    jobs: list[Job]
    real: bool
    copies: int
    cand_root: Path
    idle_busy: float

    def cfg_for(self, tag: str, mode: str, workers: int, build_jobs: int) -> EvalConfig:
        return load_config(self.cfg_path, ["--dispatch.mode", mode, "--dispatch.workers", str(workers),
                                           "--run.dir", str(self.tmp / tag), "--report.enabled", "false",
                                           "--build.jobs", str(build_jobs)])


def _prepare(tmp: Path, copies: int) -> _Setup:
    real = real_engine()
    cand_root = sample_root(real)
    cfg_path = write_config(tmp, real, "unused", cand_root)
    text = cfg_path.read_text().replace('ids = ["unused"]\n', "")
    # the sample set under `copies` method names: distinct job ids, the same work each time
    source = f'[[candidates.sources]]\nmethod = "bench"\npath = "{cand_root}"\n'
    assert source in text
    text = text.replace(source, "".join(source.replace('"bench"', f'"bench{k}"') for k in range(copies)))
    cfg_path.write_text(text + "\n[timing]\niterations = 50\nrounds = 2\n")
    base = load_config(cfg_path)
    tasks = load_suite(base.tasks.dir, base.tasks.split)
    jobs, orphans = make_jobs(base, tasks, {t.id for t in load_suite(base.tasks.dir, "all")}, None)
    assert not orphans, [r.task_id for r in orphans]
    cpu, own = _cpu_jiffies(), os.times()
    time.sleep(2)
    cpu_after, own_after = _cpu_jiffies(), os.times()
    own_ticks = round((own_after.user + own_after.system - own.user - own.system) * os.sysconf("SC_CLK_TCK"))
    idle_busy = _busy((cpu[0] + own_ticks, cpu[1]), cpu_after)  # this process's own CPU time not counted
    return _Setup(tmp, cfg_path, base, jobs, real, copies, cand_root, idle_busy)


def _rounds(st: _Setup, one: int, rounds: int) -> dict[str, list[ModeRun]]:
    """Warm up, then every mode once per round, the order rotated each round."""
    # the pristine tree first, in the driver (on a fresh cache this copies the tree once; the actors then
    # find it, ensure_pristine is also safe when they start together)
    ensure_pristine(st.base.mnn)
    # warm-up: native baseline, workspaces w0 and w1, ccache and the native models, for every sample once
    run_ray(st.cfg_for("warm", "ray", 2, 1), [j for j in st.jobs if j.method == "bench0"], "warm-up")
    modes = {
        "serial": lambda r: run_serial(st.cfg_for(f"serial-{r}", "serial", 1, one), st.jobs, "serial"),
        "ray1": lambda r: run_ray(st.cfg_for(f"ray1-{r}", "ray", 1, one), st.jobs, "ray 1 worker"),
        "ray2": lambda r: run_ray(st.cfg_for(f"ray2-{r}", "ray", 2, 1), st.jobs, "ray 2 workers"),
    }
    names = list(modes)
    per: dict[str, list[ModeRun]] = {k: [] for k in names}
    for r in range(rounds):
        for k in names[r % 3:] + names[: r % 3]:  # rotated: each mode runs first, middle and last
            per[k].append(modes[k](r))
    return per


def scaling(copies: int | None = None, one_worker_jobs: int | None = 1, rounds: int | None = None) -> int:
    """Benchmark 3 (see :mod:`kit.bench`)."""
    real = real_engine()
    copies = copies or (1 if real else 8)
    rounds = rounds or (2 if real else 3)
    with tempfile.TemporaryDirectory(prefix="mkb-scaling-") as tmp_s:
        st = _prepare(Path(tmp_s), copies)
        one = one_worker_jobs or st.base.build.jobs
        per = _rounds(st, one, rounds)
    _print_table(st, per, one, rounds)
    _print_ratios(per, one)
    return 0


def _print_table(st: _Setup, per: dict[str, list[ModeRun]], one: int, rounds: int) -> None:
    serial, ray1, ray2 = (_median_run(per[k]) for k in ("serial", "ray1", "ray2"))
    runs = (serial, ray1, ray2)
    every = [m for k in per for m in per[k]]
    base, real, copies, cand_root, idle_busy = st.base, st.real, st.copies, st.cand_root, st.idle_busy
    n = serial.n
    print()
    print(f"engine: {'MNN ' + base.mnn.version if real else 'fixture'}; {n} jobs = {n // copies} samples of "
          f"{cand_root.relative_to(ROOT)} x {copies} method names; timing {base.timing.rounds_min}-{base.timing.rounds_max} rounds x "
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



def _print_ratios(per: dict[str, list[ModeRun]], one: int) -> None:
    serial, ray1, ray2 = (_median_run(per[k]) for k in ("serial", "ray1", "ray2"))
    n = serial.n
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
