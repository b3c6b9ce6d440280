"""The adversarial corpus (tests/adversarial/corpus.py) through ``mkb eval`` on the fixture engine, sandboxed as by
default: every case gets its expected status, error kind, flags and reason; the worker stays alive (one run, every
job recorded); nothing is left behind (no process, no file outside scratch, the workspace and the native baseline
byte-identical, no host secret in any record); and best-of-k over the corpus plus the honest kernel scores the
task by the honest kernel."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import polars as pl
import pytest
from evalcfg import write_config

from kit.host import sandbox_check
from kit.job.worker import setup_worker
from kit.outline.evaluate import evaluate
from kit.results.shards import read_records
from kit.score import metrics
from kit.settings.config import load_config
from kit.suite.tasks import load_suite

sys.path.insert(0, str(Path(__file__).parent / "adversarial"))
from checks import check_case, check_nothing_left, hash_dir  # noqa: E402
from corpus import CASES, ESCAPE_DIR, HONEST, HOST_SECRET, TASK, kernel  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(sandbox_check.bwrap_works()), reason=f"the corpus runs sandboxed: {sandbox_check.bwrap_works()}"),
]


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory, fixture_engine_pristine, fixture_tasks_dir):
    tmp = tmp_path_factory.mktemp("adversarial")
    for case in CASES:
        d = tmp / "cands" / TASK / case.name
        d.mkdir(parents=True)
        for name, data in kernel(fixture_engine_pristine, case).items():
            (d / name).write_bytes(data)
    shutil.rmtree(ESCAPE_DIR, ignore_errors=True)
    ESCAPE_DIR.mkdir(parents=True)
    (ESCAPE_DIR / "secret.txt").write_text(HOST_SECRET + "\n")
    cfg_path = write_config(
        tmp / "cfg.toml", run_dir=tmp / "run", tasks_dir=fixture_tasks_dir, ids=[TASK], method="adversarial",
        candidates=tmp / "cands",
        mnn={"engine": "fixture", "source_dir": fixture_engine_pristine, "cache_dir": tmp / "cache", "check_tree": False},
        build={"jobs": 1, "candidate_timeout_s": 60},
        verify={"trials": 2, "extra_trials": 1, "run_timeout_s": 10, "convert_timeout_s": 30, "memory_limit_mb": 1024},
        timing={"warmup": 1, "iterations": 5, "rounds": 2},
        sandbox={"mode": "bwrap", "build_memory_mb": 1024, "file_mb": 64})
    cfg = load_config(cfg_path)
    worker = setup_worker(cfg)  # the native baseline and the workspace, before any candidate
    native_before = hash_dir(worker.native.dir)
    ws = worker.workspace
    worker.workspace.release()
    assert evaluate(cfg) == 0
    yield cfg, read_records(cfg.run.dir), native_before, ws, tmp
    shutil.rmtree(ESCAPE_DIR, ignore_errors=True)


def test_the_corpus_has_every_class():
    assert len(CASES) >= 30
    assert {c.klass for c in CASES} >= {"static", "symbols", "sandbox", "limits", "runtime", "input", "honest"}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_case_gets_its_expected_outcome(corpus_run, case):
    check_case(corpus_run[1], case)


def test_nothing_is_left_behind(corpus_run):
    cfg, records, native_before, ws, tmp = corpus_run
    native = next((cfg.mnn.cache_dir / "native").iterdir())
    check_nothing_left(CASES, records, ws, tmp, native, native_before)


def test_best_of_k_scores_the_task_by_the_honest_kernel(corpus_run):
    """Every hostile case that was not refused is a correct kernel doing extra things; none scores a speedup that
    is not a real kernel's: the task's best-of-k speedup is that of an ``ok`` record, the honest one among them,
    below the implausible factor.  The open cases (``Case.open``: holes no check closes yet, whose speedup is
    made up) are left out."""
    cfg, records, _, _, _ = corpus_run
    records = records.filter(~pl.col("sample_id").is_in([c.name for c in CASES if c.open]))
    tasks = load_suite(cfg.tasks.dir, "all", [TASK])
    s = metrics.summary(records, tasks).row(0, named=True)
    ok = records.filter((pl.col("status") == "ok") & pl.col("speedup").is_not_null())
    assert s["fcr"] == 1.0 and s["csr"] == 1.0
    assert HONEST.name in ok["sample_id"].to_list()
    assert s["geomean_speedup"] == pytest.approx(ok["speedup"].max())
    assert s["geomean_speedup"] < cfg.timing.implausible_speedup


def test_a_content_keyed_cache_has_nothing_to_replay_when_timed(corpus_run):
    """The reviewer's cheat (outputs cached by 8 sampled input values) ran 4.04x faster than native while the
    timed forwards repeated two input sets; on fresh inputs it never hits and computes every forward, so it is no
    faster than the honest kernel measured in the same run (a ratio of the two, with a margin for noise: the cheat
    would be several times faster had it hit)."""
    _, records, _, _, _ = corpus_run
    ms = {r["sample_id"]: r["candidate_ms"] for r in records.iter_rows(named=True)
          if r["sample_id"] in (HONEST.name, "caches_on_sampled_input_values")}
    assert all(v is not None and v > 0 for v in ms.values()) and len(ms) == 2
    assert ms["caches_on_sampled_input_values"] > 0.5 * ms[HONEST.name]
