"""Benchmarks of this kit beside an older one (``--checks-cost``, ``--throughput --before``), side by side.

The sample set (the real tree's ``candidates/sample`` with ``MKB_MNN__SOURCE_DIR`` set, else the fixture
engine's) is evaluated by ``mkb eval`` with this kit and with the kit of ``--before``, exported by ``git archive``
into a temporary folder.  Each side runs its own tree (its tasks, samples and, on the fixture engine, its
engine) and its own cache (on the real tree its compiler cache seeded from the user's kit cache, so the native
build need not start cold), warmed by one untimed evaluation (the native baseline built); then ``repeats``
evaluations each into a fresh run directory, interleaved (before, after, before, ...).

Two protocols:

* ``fixed`` (``--checks-cost``, default before :data:`BEFORE`: main before the first of issue 26's parts was
  merged, so without the CPU accounting and the forward rule, the runner's seccomp filter and thread settle
  point, vouched inputs, bounded output and removal by descriptors, the delegation flag): configs/default.toml's
  timing with the fixed 10 rounds (the former default, which today's adaptive rounds reach at most, known to
  both kits), serial dispatch, the candidates as they are.
* ``own`` (``--throughput --before``, default :data:`BEFORE_ADAPTIVE`: main before issue 27's adaptive rounds,
  correctness-only checks and per-job savings): each side's own ``configs/default.toml`` ``[verify]`` and
  ``[timing]`` (what each kit's users get), Ray with ``workers`` workers, every evaluation on a fresh copy of
  the sample set made unique (:func:`kit.bench.coldcache.make_unique`: every candidate's build misses ccache).

Prints per side the median wall seconds of ``mkb eval`` (end to end, the process's start included), the sums
over its records of the timing, verification and build stages' seconds, the ``ok`` records' summed timing
seconds, the ratios after / before, the statuses of each side and the load average.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from kit.bench.coldcache import make_unique
from kit.bench.common import ROOT, default_protocol, real_engine, sample_root, toml_sections
from kit.bench.throughput import summarize
from kit.results.shards import scan

#: main's last commit before the first part of issue 26 was merged (3512d79, "Merge branch 'h2'", has it as its
#: first parent)
BEFORE = "00e26a4"
#: main when issue 27 was filed (fixed 10 rounds, no correctness-only checks): "today's main" of its figures
BEFORE_ADAPTIVE = "9d0ac12"
#: the stages whose seconds are summed over the records (:data:`kit.bench.throughput.STAGES`; verify includes
#: verification's conversion)
STAGES = ("timing", "verify", "build")
#: the fixed protocol of ``--checks-cost``
FIXED_TIMING = {"timing": {"warmup": 10, "iterations": 30, "rounds": 10}}


class SideBySideError(ValueError):
    """A bad input of the side-by-side benchmark (a commit git cannot export, too few repeats or workers, an unknown
    protocol), said in one line naming it."""


def _export(commit: str, dest: Path) -> Path:
    """The tree of ``commit`` of this repository, unpacked into ``dest``.

    Raises:
        SideBySideError: git cannot export it (not a git checkout, no such commit), with git's message."""
    res = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit], capture_output=True)
    if res.returncode != 0:
        raise SideBySideError(f"--before {commit}: git cannot export that commit of {ROOT}: "
                         f"{res.stderr.decode(errors='replace').strip()[:300]}")
    data = res.stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        tf.extractall(dest, filter="data")
    return dest


def write_side_config(side: Path, tmp: Path, name: str, real: bool, sections: dict[str, dict], workers: int,
                      cands: Path | None = None) -> tuple[Path, Path]:
    """The config of one evaluation of ``side``'s sample set (or of ``cands``) into ``tmp/name`` with ``sections``
    (e.g. ``[timing]``) and ``workers`` Ray workers (0: serial dispatch), the side's cache ``tmp/cache``; the
    config's path and its run directory."""
    if real:
        src, engine, tasks = os.environ["MKB_MNN__SOURCE_DIR"], "mnn", side / "tasks"
    else:
        fx = side / "tests" / "fixture_engine"
        src, engine, tasks = fx, "fixture", fx / "tasks"
    dispatch = 'mode = "serial"' if workers == 0 else f'mode = "ray"\nworkers = {workers}'
    path = tmp / f"{name}.toml"
    path.write_text(f"""[run]
dir = "{tmp / name}"
[tasks]
dir = "{tasks}"
split = "all"
[[candidates.sources]]
method = "sample"
path = "{cands or sample_root(real, side)}"
[mnn]
engine = "{engine}"
source_dir = "{src}"
cache_dir = "{tmp / 'cache'}"
[dispatch]
{dispatch}
[report]
enabled = false
""" + toml_sections(sections))
    return path, tmp / name


def _seed_ccache(cache: Path) -> None:
    """Copy the user's kit compiler cache into ``cache`` (the native build of either side then mostly hits)."""
    user = Path(os.environ.get("MKB_MNN__CACHE_DIR", Path.home() / ".cache" / "mkb")) / "ccache"
    if user.is_dir() and not (cache / "ccache").exists():
        shutil.copytree(user, cache / "ccache", symlinks=True)


def _evaluate(side: Path, config_and_run: tuple[Path, Path]) -> dict[str, float | dict[str, int]]:
    """One ``mkb eval`` of a config by ``side``'s kit (``config_and_run``: the config and its run directory): its
    wall seconds, its records' count, their stage seconds summed, the ``ok`` records' timing seconds and the
    statuses.

    Raises:
        RuntimeError: the evaluation did not end with 0."""
    config, run_dir = config_and_run
    env = {**os.environ, "PYTHONPATH": str(side), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("MKB_MNN__SOURCE_DIR", None)  # the config names the tree
    t = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "kit.cli", "eval", "--config", str(config)], cwd=side, env=env,
                         capture_output=True, text=True)
    wall_s = time.monotonic() - t
    if res.returncode != 0:
        raise RuntimeError(f"{side}: mkb eval exited {res.returncode}: {res.stderr[-2000:]}")
    got = summarize(scan(run_dir).collect().to_dicts(), side.name, 0, wall_s, wall_s)
    return {"wall_s": wall_s, "records": float(got.n), **{f"{s}_s": got.split_s[s] for s in STAGES},
            "ok_timing_s": got.ok_timing_s, "statuses": got.statuses}


def side_by_side(repeats: int, before: str, protocol: str = "fixed", workers: int = 0) -> int:
    """The benchmark of the module's docstring (``protocol``: ``fixed`` or ``own``); 0 when every evaluation ran
    and both sides gave the same statuses in every evaluation, else 1.

    Raises:
        SideBySideError: an unknown ``protocol``, ``repeats`` below 1, ``workers`` below 0, a ``before`` git
            cannot export."""
    if protocol not in ("fixed", "own"):
        raise SideBySideError(f"protocol {protocol!r}: 'fixed' or 'own'")
    if repeats < 1 or workers < 0:
        raise SideBySideError(f"--repeats {repeats} / workers {workers}: at least one evaluation per side, workers >= 0")
    real = real_engine()
    with tempfile.TemporaryDirectory(prefix="mkb-sidebyside-") as tmp_s:
        tmp = Path(tmp_s)
        sides = {"before": _export(before, tmp / "before" / "src"), "after": ROOT}
        sections = {name: FIXED_TIMING if protocol == "fixed" else default_protocol(side) for name, side in sides.items()}
        for name, side in sides.items():  # the warm-up: native baseline, workspaces, compiler cache
            (tmp / name).mkdir(exist_ok=True)
            if real:
                _seed_ccache(tmp / name / "cache")
            got = _evaluate(side, write_side_config(side, tmp / name, "warm", real, sections[name], workers))
            print(f"warm-up {name} ({side}): {got['wall_s']:.1f} s", flush=True)
        runs: dict[str, list[dict]] = {name: [] for name in sides}
        for i in range(repeats):
            for name, side in sides.items():
                cands = None
                if protocol == "own":  # cache-cold: new file contents in every evaluation
                    cands = tmp / name / f"cands{i}"
                    make_unique(sample_root(real, side), cands, secrets.token_hex(8))
                runs[name].append(_evaluate(side, write_side_config(side, tmp / name, f"run{i}", real,
                                                                    sections[name], workers, cands)))
                print(f"{name} {i}: " + ", ".join(f"{k} {v:.1f}" for k, v in runs[name][-1].items()
                                                  if k != "statuses"), flush=True)
    return _print(runs, before, protocol, workers, real)


def _print(runs: dict[str, list[dict]], before: str, protocol: str, workers: int, real: bool) -> int:
    what = ("10 x (10 + 30) forwards per side and round" if protocol == "fixed"
            else "each kit's default protocol, cache-cold")
    print(f"\nsample set on the {'real MNN tree' if real else 'fixture engine'}, {what}, "
          f"{f'{workers} Ray worker(s)' if workers else 'serial'}; before = {before}, after = this tree; "
          f"{len(runs['after'])} evaluation(s) each, load average {os.getloadavg()[0]:.1f} at the end")
    print(f"{'figure (s, median)':<20}{'before':>10}{'after':>10}{'after/before':>14}")
    for key in ("wall_s", *(f"{s}_s" for s in STAGES), "ok_timing_s"):
        b, a = (statistics.median(r[key] for r in runs[name]) for name in ("before", "after"))
        print(f"{key:<20}{b:>10.1f}{a:>10.1f}{(a / b if b else float('nan')):>14.2f}")
    statuses = {json.dumps(r["statuses"]) for rs in runs.values() for r in rs}
    for name, rs in runs.items():
        print(f"statuses {name}: " + "; ".join(json.dumps(r["statuses"]) for r in rs))
    print("statuses: the same in every evaluation" if len(statuses) == 1 else "statuses: DIFFER")
    return 0 if len(statuses) == 1 else 1


def checks_cost(repeats: int, before: str = BEFORE) -> int:
    """``--checks-cost``: :func:`side_by_side` at the fixed protocol, serial."""
    return side_by_side(repeats, before, "fixed", 0)
