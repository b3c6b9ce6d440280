"""The real MNN 3.2.2 tree cross-built for aarch64 and the sample set verified under qemu (runs only with
MKB_MNN__SOURCE_DIR set and the cross tools installed).

Uses the kit's cache (``mnn.cache_dir``, default ~/.cache/mkb): the aarch64 native baseline is built once there
(the static runtime, about 5 minutes cold on 2 cores; about a minute with a warm ccache) and reused, and so is
the host's (whose converter converts).  Emulated runs are about 400x slower than native ones: few trials, few
timed iterations.
"""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest
from crosstools import skip_without_cross_tools
from elftools.elf.elffile import ELFFile
from sample_expected import status_differences

from kit.host.shipping import elf_arch
from kit.outline.evaluate import evaluate
from kit.results.shards import scan
from kit.score.metrics import fast_col, summary
from kit.settings.config import load_config
from kit.suite.tasks import load_suite

pytestmark = [pytest.mark.mnn, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def cross_sample_run(tmp_path_factory):
    skip_without_cross_tools()
    if os.environ.get("MKB_TEST_SKIP_AARCH64_MNN") == "1":  # CI's time budget (.ci/run says so)
        pytest.skip("MKB_TEST_SKIP_AARCH64_MNN=1: the aarch64 build of the real tree (about 10 min) is left out")
    tmp = tmp_path_factory.mktemp("mnn_cross")
    p = tmp / "aarch64.toml"
    p.write_text(f"""
[run]
dir = "{tmp / 'run'}"
[tasks]
dir = "{ROOT / 'tasks'}"
split = "all"
[[candidates.sources]]
method = "sample"
path = "{ROOT / 'candidates' / 'sample'}"
[target]
arch = "aarch64"
[dispatch]
mode = "serial"
[report]
enabled = false
[verify]
trials = 2
extra_trials = 1
run_timeout_s = 600
[timing]
warmup = 1
iterations = 4
rounds = 2
timeout_s = 900
""")
    cfg = load_config(p)
    assert evaluate(cfg) == 0
    return cfg, scan(cfg.run.dir).collect()


def test_sample_set_cross_built_and_verified_under_qemu_has_expected_statuses(cross_sample_run):
    _, df = cross_sample_run
    assert not status_differences(df.iter_rows(named=True), "aarch64")


def test_neon_samples_pass_and_emulated_timings_are_never_scored(cross_sample_run):
    cfg, df = cross_sample_run
    assert set(df["target_arch"]) == {"aarch64"} and set(df["timing_device"]) == {"qemu"}
    neon = df.filter(pl.col("sample_id") == "neon")
    assert neon.height == 3 and (neon["status"] == "ok").all()
    ok = df.filter(pl.col("status") == "ok")
    assert ok["timing_emulated"].all()
    s = summary(df, load_suite(cfg.tasks.dir)).row(0, named=True)
    assert s["n_emulated"] == ok["task_id"].n_unique() and s[fast_col(0.0)] == 0.0 and s["geomean_speedup"] is None


def test_link_error_fails_the_static_runners_link(cross_sample_run):
    _, df = cross_sample_run
    r = df.filter((pl.col("task_id") == "argmax_axis1_keep_4d") & (pl.col("sample_id") == "link_error")).row(0, named=True)
    assert r["status"] == "compile_error" and r["error_kind"] == "linker", r["error_message"]
    assert "reduceFloat" in r["error_message"]


def test_native_runner_is_static_for_aarch64(cross_sample_run):
    cfg, _ = cross_sample_run
    for meta in (cfg.mnn.cache_dir / "native").glob("*/meta.json"):
        runner = meta.parent / "bin" / "mkb_runner"
        if '"arch": "aarch64"' in meta.read_text() and runner.is_file():
            assert elf_arch(runner.read_bytes()) == "aarch64"
            with runner.open("rb") as f:
                assert not any(s["p_type"] == "PT_INTERP" for s in ELFFile(f).iter_segments())
            return
    pytest.fail("no aarch64 native baseline in the cache")
