"""Benchmark (``--checks-cost``): what issue 26's checks cost on the whole sample set, side by side.

The sample set (the real tree's ``candidates/sample`` with ``MKB_MNN__SOURCE_DIR`` set, else the fixture
engine's) is evaluated by ``mkb eval`` with this kit and with the kit of ``--before`` (default :data:`BEFORE`:
main before the first of issue 26's parts was merged, so without the CPU accounting and the forward rule, the
runner's seccomp filter and thread settle point, vouched inputs, bounded output and removal by descriptors, the
delegation flag), exported by ``git archive`` into a temporary folder.  Each side runs its own tree (its
tasks, samples and, on the fixture engine, its engine) and its own cache, warmed by one untimed evaluation
(the native baseline built); then ``repeats`` evaluations each into a fresh run directory, interleaved
(before, after, before, ...).  Protocol: configs/default.toml's timing with the fixed 10 rounds (the former
default, which today's adaptive rounds reach at most, known to both kits), serial dispatch, the sandbox as
configured by default.  Prints per side the median wall seconds of ``mkb eval`` and the sums over its records of
the timing, verification and build stages' seconds, the ratios after / before and the load average.
"""

from __future__ import annotations

import io
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from kit.bench.common import ROOT, real_engine
from kit.results.shards import scan

#: main's last commit before the first part of issue 26 was merged (3512d79, "Merge branch 'h2'", has it as its
#: first parent)
BEFORE = "00e26a4"
#: the per-record stage seconds summed (both kits' records have them)
STAGES = ("timing_s", "verify_s", "build_s")


def _export(commit: str, dest: Path) -> Path:
    """The tree of ``commit`` of this repository, unpacked into ``dest``.

    Raises:
        subprocess.CalledProcessError: git cannot export it (not a git checkout, no such commit)."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        tf.extractall(dest, filter="data")
    return dest


def _config(side: Path, tmp: Path, name: str, real: bool) -> tuple[Path, Path]:
    """The config of one evaluation of ``side``'s sample set into ``tmp/name`` (the side's cache ``tmp/cache``),
    and that run directory."""
    if real:
        src, engine, tasks, cands = os.environ["MKB_MNN__SOURCE_DIR"], "mnn", side / "tasks", side / "candidates"
    else:
        fx = side / "tests" / "fixture_engine"
        src, engine, tasks, cands = fx, "fixture", fx / "tasks", fx / "candidates"
    path = tmp / f"{name}.toml"
    path.write_text(f"""[run]
dir = "{tmp / name}"
[tasks]
dir = "{tasks}"
split = "all"
[[candidates.sources]]
method = "sample"
path = "{cands / 'sample'}"
[mnn]
engine = "{engine}"
source_dir = "{src}"
cache_dir = "{tmp / 'cache'}"
[timing]
warmup = 10
iterations = 30
rounds = 10
[dispatch]
mode = "serial"
[report]
enabled = false
""")
    return path, tmp / name


def _evaluate(side: Path, config_and_run: tuple[Path, Path]) -> dict[str, float]:
    """One ``mkb eval`` of a config by ``side``'s kit (``config_and_run``: the config and its run directory): its
    wall seconds, its records' count and their stage seconds summed.

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
    df = scan(run_dir).collect()
    return {"wall_s": wall_s, "records": float(df.height),
            **{s: float(df[s].fill_null(0.0).sum()) for s in STAGES}}


def checks_cost(repeats: int, before: str = BEFORE) -> int:
    """The benchmark of the module's docstring; 0 when every evaluation ran."""
    real = real_engine()
    with tempfile.TemporaryDirectory(prefix="mkb-checkscost-") as tmp_s:
        tmp = Path(tmp_s)
        sides = {"before": _export(before, tmp / "before" / "src"), "after": ROOT}
        for name, side in sides.items():  # the warm-up: native baseline, workspaces, compiler cache
            (tmp / name).mkdir(exist_ok=True)
            print(f"warm-up {name} ({side}): {_evaluate(side, _config(side, tmp / name, 'warm', real))['wall_s']:.1f} s",
                  flush=True)
        got: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
        for i in range(repeats):
            for name, side in sides.items():
                got[name].append(_evaluate(side, _config(side, tmp / name, f"run{i}", real)))
                print(f"{name} {i}: " + ", ".join(f"{k} {v:.1f}" for k, v in got[name][-1].items()), flush=True)
    print(f"\nsample set on the {'real MNN tree' if real else 'fixture engine'}, 10 x (10 + 30) forwards per side "
          f"and round; before = {before}, after = this tree; {repeats} evaluation(s) each, load average "
          f"{os.getloadavg()[0]:.1f} at the end")
    print(f"{'figure (s, median)':<20}{'before':>10}{'after':>10}{'after/before':>14}")
    for key in ("wall_s", *STAGES):
        b, a = (statistics.median(r[key] for r in got[name]) for name in ("before", "after"))
        print(f"{key:<20}{b:>10.1f}{a:>10.1f}{(a / b if b else float('nan')):>14.2f}")
    return 0
