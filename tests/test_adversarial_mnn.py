"""The real-tree subset of the adversarial corpus (tests/adversarial/corpus.py): the same hostile changes, made to
MNN 3.2.2's own ``CPUArgMax.cpp`` (read from the tree at test time), through ``mkb eval`` on the ``argmax_last_2d``
task, sandboxed: each gets its expected outcome, nothing is left behind, and best-of-k scores the task by the
honest kernel (the tree's own, unchanged).  Runs only with MKB_MNN__SOURCE_DIR set."""

from __future__ import annotations

import os
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
from corpus import CASES, ESCAPE_DIR, HONEST, HOST_SECRET, kernel  # noqa: E402

pytestmark = [
    pytest.mark.mnn,
    pytest.mark.slow,
    pytest.mark.skipif(bool(sandbox_check.bwrap_works()), reason=f"the corpus runs sandboxed: {sandbox_check.bwrap_works()}"),
]

ROOT = Path(__file__).resolve().parent.parent
TASK = "argmax_last_2d"
#: one case or more of every class but the bad inputs (nothing in them depends on the tree) and the compile-time
#: bomb (the fixture run shows the compiler's memory cap; on the real tree it only takes longer)
SUBSET = ("honest", "runs_a_shell", "opens_a_socket", "reads_proc", "includes_a_native_implementation",
          "patches_the_clock", "forks_through_a_pointer", "escapes_to_the_host_tmp", "plants_a_file_in_the_workspace",
          "reads_a_host_file_into_its_error", "writes_a_huge_file", "spins_forever", "allocates_everything",
          "exits_early", "starts_a_thread", "caches_its_first_result", "writes_its_input",
          "correct_for_its_first_3_calls", "leaves_a_thread_running", "skips_timed_forwards_but_the_last",
          "rewrites_its_timing_at_exit", "scales_recorded_times", "restarts_the_op_clock", "forges_stamp_lines",
          "hides_stamps_in_a_pipe", "zeros_when_timed_forges_a_stamp", "zeros_when_timed_floods_stderr",
          "zeroes_the_input_pool", "deep_tree_in_outputs", "writes_3gb_through_files", "prints_1gib_on_stdout",
          "prints_1gib_on_stderr", "installs_a_fault_handler_by_hidden_syscall", "makes_its_output_unreadable",
          "calls_socketpair_through_a_pointer", "joins_a_helper_thread", "hogs_12_gb")
REAL = tuple(c for c in CASES if c.name in SUBSET)


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    src = os.environ.get("MKB_MNN__SOURCE_DIR")
    if not src:
        pytest.skip("needs a real MNN 3.2.2 tree: set MKB_MNN__SOURCE_DIR")
    tmp = tmp_path_factory.mktemp("adversarial_mnn")
    for case in REAL:
        d = tmp / "cands" / TASK / case.name
        d.mkdir(parents=True)
        for name, data in kernel(Path(src), case).items():
            (d / name).write_bytes(data)
    shutil.rmtree(ESCAPE_DIR, ignore_errors=True)
    ESCAPE_DIR.mkdir(parents=True)
    (ESCAPE_DIR / "secret.txt").write_text(HOST_SECRET + "\n")
    cfg_path = write_config(
        tmp / "cfg.toml", run_dir=tmp / "run", tasks_dir=ROOT / "tasks", ids=[TASK], method="adversarial",
        candidates=tmp / "cands", build={"candidate_timeout_s": 300},
        verify={"trials": 2, "extra_trials": 1, "run_timeout_s": 20, "memory_limit_mb": 2048},
        timing={"warmup": 2, "iterations": 20, "rounds": 4}, sandbox={"mode": "bwrap", "file_mb": 64})
    cfg = load_config(cfg_path)
    worker = setup_worker(cfg)  # the native baseline and the workspace, before any candidate
    native_dir, native_before, ws = worker.native.dir, hash_dir(worker.native.dir), worker.workspace
    ws.release()
    assert evaluate(cfg) == 0
    yield cfg, read_records(cfg.run.dir), native_dir, native_before, ws, tmp
    shutil.rmtree(ESCAPE_DIR, ignore_errors=True)


def test_the_subset_covers_every_class_but_bad_inputs():
    assert len(REAL) == len(SUBSET)
    assert {c.klass for c in REAL} == {c.klass for c in CASES} - {"input"}


@pytest.mark.parametrize("case", REAL, ids=[c.name for c in REAL])
def test_each_case_gets_its_expected_outcome_on_the_real_tree(real_run, case):
    check_case(real_run[1], case, real=True)


def test_nothing_is_left_behind_on_the_real_tree(real_run):
    _, records, native_dir, native_before, ws, tmp = real_run
    check_nothing_left(REAL, records, ws, tmp, native_dir, native_before)


def test_best_of_k_on_the_real_tree_is_the_honest_kernel(real_run):
    cfg, records, *_ = real_run
    tasks = load_suite(cfg.tasks.dir, "all", [TASK])
    s = metrics.summary(records, tasks).row(0, named=True)
    ok = records.filter((pl.col("status") == "ok") & pl.col("speedup").is_not_null())
    assert s["fcr"] == 1.0 and HONEST.name in ok["sample_id"].to_list()
    assert s["geomean_speedup"] == pytest.approx(ok["speedup"].max())
    assert s["geomean_speedup"] < cfg.timing.implausible_speedup
