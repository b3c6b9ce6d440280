"""An aarch64 target over a loopback Ray cluster (``tests/raycluster.py``): build workers on the ``x86`` head
cross-build the fixture engine and verify under qemu; the timing worker on the node labelled ``aarch64`` receives
each candidate's static aarch64 runner and models through Ray's object store, and the native baseline once.  That
node is an x86_64 raylet standing in for an ARM machine, so it runs the runners under qemu: its timings are
emulated and never scored — the plumbing is what is tested.  The sample set ends with its per-target statuses
(the fixture's ``candidates/expected_neon.toml [aarch64]`` for the NEON samples), and a shipped runner of another
machine is refused naming the file.  Real cross compiler, real qemu-aarch64-static, real Ray (loopback)::

    unshare -n sh -c 'ip link set lo up; .venv/bin/pytest tests/test_dispatch_cross.py -q'
"""

from __future__ import annotations

import sys
import tomllib
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
from conftest_fixture import FIXTURE_ROOT
from crosstools import skip_without_cross_tools

from kit.host.shipping import Bundle, elf_arch, elf_static
from kit.job.record import Job
from kit.outline.evaluate import evaluate
from kit.results.records import Record
from kit.results.shards import scan
from kit.score.metrics import fast_col, summary
from kit.settings.config import EvalConfig
from kit.suite.tasks import load_suite

pytestmark = pytest.mark.slow

SAMPLE_EXPECTED = {"correct": "ok", "compile_error": "compile_error", "wrong_result": "verify_mismatch",
                   "crash": "runtime_crash"}
NEON_EXPECTED = tomllib.loads((FIXTURE_ROOT / "candidates" / "expected_neon.toml").read_text())["aarch64"]


def _config(run_dir: Path, cache: Path, engine: Path, sources: tuple[str, ...], ids: tuple[str, ...] = ()) -> EvalConfig:
    """Build on ``x86`` (2 workers), time on ``aarch64``; the fixture engine's tree, never a real one from the
    environment (which would override it)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MKB_MNN__SOURCE_DIR", raising=False)
        return EvalConfig(
            run={"dir": run_dir},
            tasks={"dir": FIXTURE_ROOT / "tasks", "split": "all", "ids": list(ids)},
            candidates={"sources": [{"method": s, "path": FIXTURE_ROOT / "candidates" / s} for s in sources]},
            mnn={"cache_dir": cache, "engine": "fixture", "source_dir": engine, "check_tree": False},
            target={"arch": "aarch64"},
            build={"jobs": 1},
            verify={"trials": 2},
            timing={"warmup": 1, "iterations": 4, "rounds": 2},
            report={"enabled": False},
            dispatch={"mode": "ray", "workers": 2, "build_resource": "x86", "timing_resource": "aarch64"},
        )


@pytest.fixture(scope="module")
def cross_split(cluster, tmp_path_factory, fixture_engine_pristine):
    skip_without_cross_tools()
    tmp = tmp_path_factory.mktemp("cross-split")
    cfg = _config(tmp / "run", tmp / "cache", fixture_engine_pristine, ("sample", "neon"))
    assert evaluate(cfg) == 0
    return cfg, scan(cfg.run.dir).collect()


def _statuses(df: pl.DataFrame, method: str) -> dict[str, str]:
    return {f"{r['task_id']}/{r['sample_id']}": r["status"] for r in df.filter(pl.col("method") == method).iter_rows(named=True)}


def _node_of(worker: str, nodes: set[str]) -> str:
    match = [n for n in nodes if n.startswith(worker.split(".")[0][1:])]
    assert len(match) == 1, (worker, nodes)
    return match[0]


def test_the_sample_set_ends_with_its_aarch64_statuses(cross_split):
    _, df = cross_split
    why = {f"{r['task_id']}/{r['sample_id']}": r["error_message"][:1500] for r in df.iter_rows(named=True)}
    got = _statuses(df, "sample")
    assert len(got) == 16
    wrong = {k: v for k, v in got.items() if v != SAMPLE_EXPECTED[k.split("/")[1]]}
    assert not wrong, {k: (v, why[k]) for k, v in wrong.items()}
    assert _statuses(df, "neon") == NEON_EXPECTED, why  # arm_neon.h kernels: ok for aarch64


def test_built_on_the_x86_node_and_timed_on_the_node_labelled_aarch64(cross_split, cluster):
    cfg, df = cross_split
    nodes = cluster["x86_nodes"] | cluster["arm_nodes"]
    assert set(df["target_arch"]) == {"aarch64"} and set(df["build_mode"]) == {"cross"}
    assert set(df["timing_device"]) == {"ray:aarch64"}
    assert {_node_of(w, nodes) for w in df["worker"]} <= cluster["x86_nodes"]  # built and verified there
    ok = df.filter(pl.col("status") == "ok")
    assert ok.height == 7
    assert {_node_of(w, nodes) for w in ok["timing_worker"]} <= cluster["arm_nodes"]
    assert df.filter(pl.col("status") != "ok")["timing_worker"].to_list() == [""] * (df.height - ok.height)
    # timed by the runners shipped to that node, under its emulator: measured, symmetric, never scored
    assert ok["timing_emulated"].all() and (ok["candidate_ms"] > 0).all()
    timed = ok.filter(pl.col("speedup").is_not_null())
    assert timed.height >= 5 and (timed["native_invocation_sha256"] == timed["candidate_invocation_sha256"]).all()
    s = summary(df, load_suite(cfg.tasks.dir)).filter(pl.col("method") == "sample").row(0, named=True)
    assert s["fcr"] == 1.0 and s[fast_col(0.0)] == 0.0 and s["n_emulated"] == 4
    # the native baseline went to the timing node once: its static aarch64 runner alone (no library, no converter)
    (shipped,) = (cfg.mnn.cache_dir / "shipped").iterdir()
    assert sorted(p.relative_to(shipped).as_posix() for p in shipped.rglob("*") if p.is_file()) == [
        "bin/mkb_runner", "done"]
    runner = (shipped / "bin" / "mkb_runner").read_bytes()
    assert elf_arch(runner) == "aarch64" and elf_static(runner)


def x86_runner_instead(job: Job, built, timer) -> Record:
    """The timing half, after swapping the candidate's shipped aarch64 runner for an x86_64 executable (what a
    build node of another kind, or a corrupted transfer, would hand over)."""
    from kit.job.pipeline import time_job

    files = dict(built.libs.files)
    assert "bin/mkb_runner" in files, sorted(files)
    files["bin/mkb_runner"] = Path(sys.executable).resolve().read_bytes()
    return time_job(job, replace(built, libs=Bundle(files, arch="aarch64")), timer)


def test_a_shipped_runner_of_another_machine_is_refused_naming_the_file(cross_split, fixture_engine_pristine):
    from kit.dispatch import RayExecutor
    from kit.outline.evaluate import execute
    from kit.run.plan import make_jobs

    cfg0, _ = cross_split
    cfg = _config(cfg0.run.dir.parent / "swapped", cfg0.mnn.cache_dir, fixture_engine_pristine, ("sample",),
                  ("fx_exp",))
    tasks = load_suite(cfg.tasks.dir, "all", ["fx_exp"])
    jobs = [j for j in make_jobs(cfg, tasks, {t.id for t in tasks}, None)[0] if j.sample_id == "correct"]
    counts = execute(jobs, set(), cfg.run.dir, RayExecutor(cfg, time_fn=x86_runner_instead))
    assert counts.ran == 1
    (row,) = scan(cfg.run.dir).collect().iter_rows(named=True)
    assert (row["status"], row["error_kind"]) == ("harness_error", "artefact"), row["error_message"]
    msg = row["error_message"]
    assert "bin/mkb_runner was built for x86_64 (ELF machine EM_X86_64)" in msg
    assert "runs aarch64 under qemu-aarch64-static (ELF machine EM_AARCH64)" in msg
    assert row["trials"] and row["timing_worker"].endswith(".t0")  # verified on the build node; refused there
