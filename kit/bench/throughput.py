"""Benchmark 10 (``--throughput``): what users get, candidates per hour of the sample set at the kit's default
protocol, cache-cold, with 1 and 2 workers, and where the job time goes, beside the same at the fewest timing
rounds a config allows (2: "one round" of the issue that asked for it, the least an interval needs).

The protocol is ``configs/default.toml``'s (its ``[verify]`` and ``[timing]``: 5 trials, adaptive 6 to 10 rounds x 30
iterations; ``dispatch.mode = "ray"``), the candidates the sample set, each run on a fresh copy made unique
(:func:`kit.bench.coldcache.make_unique`: ccache misses every candidate's own sources, as for an LLM's new
file).  One warm-up run first at the fewest rounds (native baseline, workspaces, native models), then one run
per (protocol,
workers) into a fresh run directory.  Prints per run: candidates per hour end to end (the executor's start,
its workers' set-up and the jobs, as ``mkb eval`` pays them) and over the work alone (first worker ready to the
last record), the jobs' summed seconds split by stage (``build_s`` and ``convert_s`` + ``verify_s``,
``timing_s``) and what lies in no stage (``wall_s`` less the stages), the median ``wall_s`` of the ``ok``
jobs, their summed ``timing_s``, the records' phases (:mod:`kit.job.phases`, where the kit records them) and
the statuses (which must agree between runs).

Run it on a quiet host: the figures are wall clock.  On the fixture engine (no ``MKB_MNN__SOURCE_DIR``) it runs
its sample set with the protocol given (the tests use a tiny one).
"""

from __future__ import annotations

import collections
import secrets
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.bench.coldcache import make_unique
from kit.bench.common import ROOT, default_protocol, real_engine, sample_root, toml_sections, write_config
from kit.outline.evaluate import execute, executor_for
from kit.results.shards import read_records
from kit.run.plan import make_jobs
from kit.settings.config import load_config
from kit.suite.tasks import load_suite

#: the stage columns of a record, in seconds (``convert_s`` is verification's conversion)
STAGES = {"build": ("build_s",), "verify": ("convert_s", "verify_s"), "timing": ("timing_s",)}
#: the config whose protocol is measured
DEFAULT_CONFIG = ROOT / "configs" / "default.toml"


@dataclass
class Throughput:
    """One run of the sample set: ``label`` (protocol), ``workers``, seconds end to end (``end_to_end_s``) and
    of the work alone (``work_s``), and its records' figures."""

    label: str
    workers: int
    end_to_end_s: float
    work_s: float
    n: int
    #: summed seconds of the jobs per stage, and ``outside``: wall_s less every stage
    split_s: dict[str, float] = field(default_factory=dict)
    #: summed seconds per phase of the records that have phases (``phases`` column; empty for older kits)
    phases_s: dict[str, float] = field(default_factory=dict)
    ok_wall_s: list[float] = field(default_factory=list)
    ok_timing_s: float = 0.0
    statuses: dict[str, int] = field(default_factory=dict)

    @property
    def per_hour(self) -> float:
        """Candidates per hour end to end."""
        return 3600 * self.n / self.end_to_end_s if self.end_to_end_s > 0 else 0.0

    @property
    def work_per_hour(self) -> float:
        """Candidates per hour over the work alone (first worker ready to the last record)."""
        return 3600 * self.n / self.work_s if self.work_s > 0 else 0.0

    @property
    def job_s(self) -> float:
        """The jobs' summed ``wall_s``."""
        return sum(self.split_s.values())


def write_run_config(tmp: Path, cands: Path, run_dir: Path, workers: int, protocol: dict[str, dict[str, Any]],
                     mode: str = "ray") -> Path:
    """A config for one run: the engine's task suite (all splits), ``cands`` as method ``sample``, ``protocol``'s
    sections, ``workers`` workers of dispatch ``mode``, no report."""
    real = real_engine()
    base = write_config(tmp, real, "unused", cands).read_text().replace('ids = ["unused"]\n', "")
    base = base.replace('method = "bench"', 'method = "sample"').replace(f'dir = "{tmp / "run"}"', f'dir = "{run_dir}"')
    path = run_dir.parent / f"{run_dir.name}.toml"
    path.write_text(base + f'[dispatch]\nmode = "{mode}"\nworkers = {workers}\n[report]\nenabled = false\n'
                    + toml_sections(protocol))
    return path


def measure(cfg_path: Path, label: str, workers: int) -> Throughput:
    """Evaluate the config at ``cfg_path`` (its run directory fresh) and return its figures."""
    cfg = load_config(cfg_path)
    tasks = load_suite(cfg.tasks.dir, cfg.tasks.split, cfg.tasks.ids or None)
    jobs, _ = make_jobs(cfg, tasks, {t.id for t in load_suite(cfg.tasks.dir, "all")}, None)
    t0 = time.monotonic()
    res = execute(jobs, set(), cfg.run.dir, executor_for(cfg), label=f"throughput {label} {workers}w")
    end_to_end = time.monotonic() - t0
    return summarize(read_records(cfg.run.dir).to_dicts(), label, workers, end_to_end, res.work_s)


def summarize(rows: list[dict[str, Any]], label: str, workers: int, end_to_end_s: float, work_s: float) -> Throughput:
    """The figures of a run's records (``rows``: one dict per record)."""
    split = dict.fromkeys([*STAGES, "outside"], 0.0)
    phases: dict[str, float] = collections.defaultdict(float)
    for r in rows:
        staged = 0.0
        for stage, cols in STAGES.items():
            s = sum(r.get(c) or 0.0 for c in cols)
            split[stage] += s
            staged += s
        split["outside"] += max((r.get("wall_s") or 0.0) - staged, 0.0)
        for name, s in (r.get("phases") or {}).items():
            phases[name] += s or 0.0
    ok = [r for r in rows if r["status"] == "ok"]
    return Throughput(label, workers, end_to_end_s, work_s, len(rows), split, dict(phases),
                      ok_wall_s=[r.get("wall_s") or 0.0 for r in ok],
                      ok_timing_s=sum(r.get("timing_s") or 0.0 for r in ok),
                      statuses=dict(sorted(collections.Counter(r["status"] for r in rows).items())))


#: the fewest timing rounds a config allows (an interval needs two): the "one round" beside the default
MIN_ROUNDS = 2


def fewest_rounds(protocol: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``protocol`` at :data:`MIN_ROUNDS` timing rounds (the rest as it is)."""
    return {**protocol, "timing": {**protocol.get("timing", {}), "rounds": MIN_ROUNDS}}


def protocols(fewest: bool = True) -> dict[str, dict[str, dict[str, Any]]]:
    """The protocols measured: ``default`` (:func:`default_protocol`) and, with ``fewest``, the same at the fewest
    timing rounds (:func:`fewest_rounds`)."""
    default = default_protocol()
    return {"default": default} | ({f"{MIN_ROUNDS} rounds": fewest_rounds(default)} if fewest else {})


def throughput(workers: tuple[int, ...] = (1, 2), fewest: bool = True,
               protocol: dict[str, dict[str, Any]] | None = None, mode: str = "ray",
               warm_up: bool = True) -> list[Throughput]:
    """Benchmark 10 (module docstring): a warm-up run (unless not ``warm_up``), then one cache-cold run per
    protocol and worker count; prints the table and returns the runs.  ``protocol``: measure this one (and its
    fewest-rounds variant) instead of the default config's; ``mode``: the dispatch mode (``serial`` has one
    worker)."""
    chosen = protocols(fewest) if protocol is None else {"given": protocol} | (
        {f"{MIN_ROUNDS} rounds": fewest_rounds(protocol)} if fewest else {})
    runs: list[Throughput] = []
    with tempfile.TemporaryDirectory(prefix="mkb-throughput-") as tmp_s:
        tmp = Path(tmp_s)
        if warm_up:  # it only prepares (native models, workspaces configured and built): at the fewest rounds
            warm = tmp / "cands-warm-up"
            make_unique(sample_root(real_engine()), warm, secrets.token_hex(8))
            measure(write_run_config(tmp, warm, tmp / "warm-up", max(workers), fewest_rounds(next(iter(chosen.values()))),
                                     mode), "warm-up", max(workers))
        for label, proto in chosen.items():
            for n in workers:
                cands = tmp / f"cands-{len(runs)}"
                make_unique(sample_root(real_engine()), cands, secrets.token_hex(8))
                cfg_path = write_run_config(tmp, cands, tmp / f"run-{len(runs)}", n, proto, mode)
                runs.append(measure(cfg_path, label, n))
    print_table(runs)
    return runs


def print_table(runs: list[Throughput]) -> None:
    """The runs side by side, one column each."""
    print(f"\nsample set, cache-cold, {runs[0].n} candidates per run; {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"{'':36}" + "".join(f"{r.label + ' ' + str(r.workers) + 'w':>18}" for r in runs))
    rows = [("candidates/hour, end to end", lambda r: f"{r.per_hour:.0f}"),
            ("candidates/hour, work only", lambda r: f"{r.work_per_hour:.0f}"),
            ("end to end [s]", lambda r: f"{r.end_to_end_s:.1f}"),
            ("job time, summed [s]", lambda r: f"{r.job_s:.1f}"),
            *[(f"  {stage} [s]", lambda r, s=stage: f"{r.split_s[s]:.1f} ({_pct(r.split_s[s], r.job_s)})")
              for stage in [*STAGES, "outside"]],
            ("ok jobs: median wall_s [s]", lambda r: f"{statistics.median(r.ok_wall_s):.2f}" if r.ok_wall_s else "-"),
            ("ok jobs: timing_s summed [s]", lambda r: f"{r.ok_timing_s:.1f}")]
    names = sorted({p for r in runs for p in r.phases_s})
    rows += [(f"  phase {p}", lambda r, p=p: f"{r.phases_s.get(p, 0.0):.1f}") for p in names]
    for name, fmt in rows:
        print(f"{name:36}" + "".join(f"{fmt(r):>18}" for r in runs))
    same = len({tuple(r.statuses.items()) for r in runs}) == 1
    print("statuses: " + (f"the same in every run: {runs[0].statuses}" if same else
                          "DIFFER: " + "; ".join(f"{r.label} {r.workers}w {r.statuses}" for r in runs)))


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f} %" if whole > 0 else "-"
