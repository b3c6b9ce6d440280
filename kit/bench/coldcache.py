"""Benchmark 6 (``--cold-cache``): candidates per hour with cache-warm and cache-cold candidates, for the host's
architecture and for the aarch64 target (cross build, verification under qemu), in one run.

The throughput benchmarks rerun the same files, so ccache serves every compile (7-12 ms for a kernel file
here) while an LLM's candidate is always new (~1.15 s to compile).  A **cold** run evaluates copies of the
sample files made unique (:func:`make_unique`: a line with a fresh nonce in every C/C++ source, so the
preprocessed text and the object differ and ccache misses); a **warm** run evaluates the same copies again
(every compile a ccache hit).  Per target: one warm-up run (native baseline, workspace, native models), then
``rounds`` rounds of cold, warm, each into a fresh run directory, serially in one worker (``dispatch.mode =
"serial"``).  Prints per mode the candidates per hour of the job loop, the median per-candidate ``wall_s`` and
``build_s``, and the ratios side by side: cold/warm per target and aarch64/x86 per mode.

Headers are left as they are: only the candidate's own C/C++ sources change (a header's nonce would have to
sit inside its include guard), so MNN files that include a candidate's header still hit the cache.
"""

from __future__ import annotations

import collections
import re
import secrets
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from kit.bench.common import ROOT, real_engine, sample_root, write_config
from kit.outline.evaluate import execute
from kit.results.shards import read_records
from kit.run.plan import make_jobs
from kit.run.serial_executor import SerialExecutor
from kit.settings.config import EvalConfig, load_config
from kit.suite.tasks import load_suite

#: the candidates' C/C++ sources (the files a nonce goes into)
SOURCES = (".c", ".cc", ".cpp", ".cxx")
#: the real tree's default subset: every sample of an atomic, a geometric and a composite task (17 candidates)
REAL_TASKS = ("argmax_axis1_keep_4d", "tile_4d", "bitwise_xor_int32")


def make_unique(src: Path, dest: Path, nonce: str) -> int:
    """Copy the candidate tree ``src`` to ``dest`` (links kept as links), appending to every C/C++ source a
    definition that only this ``nonce`` (hex) has: ``static const char mkb_bench_nonce_<n>[]
    __attribute__((unused)) = "<nonce>";`` (internal linkage, no exported symbol; a comment would not do, the
    preprocessor drops it and ccache's preprocessor mode would hit).  Returns the number of files changed.

    Raises:
        ValueError: ``nonce`` is not hexadecimal."""
    if not re.fullmatch(r"[0-9a-f]+", nonce):
        raise ValueError(f"nonce {nonce!r}: hexadecimal digits only")
    shutil.copytree(src, dest, symlinks=True)
    changed = 0
    for i, path in enumerate(sorted(dest.rglob("*"))):
        if path.suffix in SOURCES and path.is_file() and not path.is_symlink():
            text = path.read_text(encoding="utf-8", errors="surrogateescape")
            line = f'\nstatic const char mkb_bench_nonce_{nonce}_{i}[] __attribute__((unused)) = "{nonce}";\n'
            path.write_text(text + line, encoding="utf-8", errors="surrogateescape")
            changed += 1
    return changed


@dataclass
class ColdRun:
    """One run of the candidate set (seconds of wall clock)."""

    arch: str
    mode: str
    work_s: float = 0.0
    n: int = 0
    wall_s: list[float] = field(default_factory=list)
    build_s: list[float] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)

    @property
    def per_hour(self) -> float:
        return 3600 * self.n / self.work_s

    @property
    def per_candidate_s(self) -> float:
        return self.work_s / self.n


def _config(tmp: Path, real: bool, arch: str, tasks: tuple[str, ...] | None) -> Path:
    """The benchmark's config for ``arch`` (its candidate path replaced per run)."""
    cfg_path = write_config(tmp, real, "unused", Path("CANDIDATES"))
    ids = "" if tasks is None else "ids = [" + ", ".join(f'"{t}"' for t in tasks) + "]\n"
    text = cfg_path.read_text().replace('ids = ["unused"]\n', ids)
    cfg_path.write_text(text + f'\n[target]\narch = "{arch}"\n[dispatch]\nmode = "serial"\n[report]\n'
                        'enabled = false\n[verify]\ntrials = 2\n[timing]\nwarmup = 1\niterations = 4\nrounds = 2\n')
    return cfg_path


def _run(cfg_path: Path, cands: Path, run_dir: Path, arch: str, mode: str) -> ColdRun:
    """Evaluate ``cands`` with the config at ``cfg_path`` into ``run_dir``, serially; its figures."""
    text = cfg_path.read_text().replace('path = "CANDIDATES"', f'path = "{cands}"')
    (run_dir.parent / f"{run_dir.name}.toml").write_text(text)
    cfg: EvalConfig = load_config(run_dir.parent / f"{run_dir.name}.toml", ["--run.dir", str(run_dir)])
    tasks = load_suite(cfg.tasks.dir, cfg.tasks.split, cfg.tasks.ids or None)
    jobs, _ = make_jobs(cfg, tasks, {t.id for t in load_suite(cfg.tasks.dir, "all")}, None)
    res = execute(jobs, set(), cfg.run.dir, SerialExecutor(cfg), label=f"{arch} {mode}")
    frame = read_records(run_dir)
    return ColdRun(arch, mode, work_s=res.work_s, n=frame.height,
                   wall_s=frame["wall_s"].fill_null(0.0).to_list(),
                   build_s=[b for b in frame["build_s"].to_list() if b is not None],
                   statuses=dict(sorted(collections.Counter(frame["status"].to_list()).items())))


def cold_cache(archs: tuple[str, ...] = ("x86_64", "aarch64"), rounds: int = 1,
               tasks: tuple[str, ...] | None = None) -> int:
    """Benchmark 6 (module docstring).  ``tasks``: task ids (default: :data:`REAL_TASKS` on the real tree, every
    fixture task otherwise)."""
    real = real_engine()
    tasks = tasks or (REAL_TASKS if real else None)
    per: dict[tuple[str, str], list[ColdRun]] = collections.defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="mkb-coldcache-") as tmp_s:
        tmp = Path(tmp_s)
        for arch in archs:
            (tmp / arch).mkdir()
            cfg_path = _config(tmp / arch, real, arch, tasks)
            warm = tmp / arch / "cands-warm"
            make_unique(sample_root(real), warm, secrets.token_hex(8))
            _run(cfg_path, warm, tmp / arch / "warm-up", arch, "warm-up")  # baseline, workspace, ccache
            for r in range(rounds):
                cold = tmp / arch / f"cands-cold-{r}"
                make_unique(sample_root(real), cold, secrets.token_hex(8))
                per[(arch, "cold")].append(_run(cfg_path, cold, tmp / arch / f"cold-{r}", arch, "cold"))
                per[(arch, "warm")].append(_run(cfg_path, warm, tmp / arch / f"warm-{r}", arch, "warm"))
    _print(per, archs, rounds, real, tasks)
    return 0


def _med(runs: list[ColdRun], what: str) -> float:
    return statistics.median(getattr(r, what) for r in runs)


def _print(per: dict[tuple[str, str], list[ColdRun]], archs: tuple[str, ...], rounds: int, real: bool,
           tasks: tuple[str, ...] | None) -> None:
    first = next(iter(per.values()))[0]
    print()
    print(f"engine: {'MNN' if real else 'fixture'}; {first.n} candidates of {sample_root(real).relative_to(ROOT)}"
          f" ({'tasks ' + ', '.join(tasks) if tasks else 'every task'}); serial, 1 worker; {rounds} round(s) of "
          f"cold then warm per target after a warm-up; verify 2 trials, timing 2 rounds x 4 iterations; "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    print(f"{'':34}" + "".join(f"{a + ' ' + m:>16}" for a in archs for m in ("warm", "cold")))
    rows = [("candidates per hour (job loop)", lambda rs: f"{_med(rs, 'per_hour'):.0f}"),
            ("per candidate, job loop [s]", lambda rs: f"{_med(rs, 'per_candidate_s'):.2f}"),
            ("median job wall_s [s]", lambda rs: f"{statistics.median(w for r in rs for w in r.wall_s):.2f}"),
            ("median build_s [s]", lambda rs: f"{statistics.median(b for r in rs for b in r.build_s):.2f}")]
    for name, fmt in rows:
        print(f"{name:34}" + "".join(f"{fmt(per[(a, m)]):>16}" for a in archs for m in ("warm", "cold")))
    for a in archs:
        w, c = per[(a, "warm")], per[(a, "cold")]
        print(f"{a}: cold/warm time per candidate {_med(c, 'per_candidate_s') / _med(w, 'per_candidate_s'):.2f}x, "
              f"median build_s {statistics.median(b for r in c for b in r.build_s):.2f} s cold vs "
              f"{statistics.median(b for r in w for b in r.build_s):.2f} s warm")
    if len(archs) == 2:
        x, y = archs
        for m in ("warm", "cold"):
            print(f"{m}: {y}/{x} time per candidate "
                  f"{_med(per[(y, m)], 'per_candidate_s') / _med(per[(x, m)], 'per_candidate_s'):.2f}x")
    for a in archs:
        runs = per[(a, "warm")] + per[(a, "cold")]
        same = len({tuple(r.statuses.items()) for r in runs}) == 1
        print(f"{a} records: " + (f"the same statuses in every run: {runs[0].statuses}" if same else
                                  "WARNING: statuses differ: " + "; ".join(f"{r.mode} {r.statuses}" for r in runs)))
