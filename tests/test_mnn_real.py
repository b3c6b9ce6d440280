"""The real pipeline on a real MNN 3.2.2 tree (runs only with MKB_MNN__SOURCE_DIR set).

Uses the kit's cache (``mnn.cache_dir``, default ~/.cache/mkb): the native baseline is built once there
(about 13 minutes cold on 2 cores, about a minute with a warm ccache) and reused.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from sample_expected import status_differences

from kit.outline.evaluate import evaluate
from kit.results.shards import scan
from kit.settings.config import load_config

pytestmark = [pytest.mark.mnn, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent


def _cfg(tmp: Path, name: str, extra: str = "") -> Path:
    p = tmp / f"{name}.toml"
    p.write_text(
        f"""
[run]
dir = "{tmp / name}"
[tasks]
dir = "{ROOT / 'tasks'}"
split = "all"
[dispatch]
mode = "serial"
[report]
enabled = false
[verify]
trials = 5
[timing]
warmup = 5
iterations = 100
rounds = 2
{extra}
"""
    )
    return p


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mnn_sample")
    extra = f'[[candidates.sources]]\nmethod = "sample"\npath = "{ROOT / "candidates" / "sample"}"\n'
    cfg = load_config(_cfg(tmp, "sample", extra))
    assert evaluate(cfg) == 0
    return scan(cfg.run.dir).collect()


def test_sample_set_has_expected_statuses(sample_run):
    assert not status_differences(sample_run.iter_rows(named=True), "x86_64")


def test_correct_samples_are_timed_against_native(sample_run):
    ok = sample_run.filter(pl.col("status") == "ok")
    assert ok.height >= 6
    for r in ok.iter_rows(named=True):
        assert r["candidate_ms"] > 0 and len(r["candidate_samples_ms"]) == 200
        if r["error_kind"] == "no_native":
            continue
        assert r["native_ms"] > 0 and r["speedup"] == pytest.approx(r["native_ms"] / r["candidate_ms"])
        assert r["speedup_ci_low"] <= r["speedup"] <= r["speedup_ci_high"]


def test_new_converter_file_for_an_op_native_cannot_convert(sample_run):
    """BitwiseXor: native MNN 3.2.2 has no converter; the sample adds onnxextra/OnnxBitwiseXor.cpp."""
    r = sample_run.filter((pl.col("task_id") == "bitwise_xor_int32") & (pl.col("sample_id") == "correct")).row(0, named=True)
    assert r["status"] == "ok", r["error_message"]
    assert r["error_kind"] == "no_native" and r["speedup"] is None


def test_compile_errors_carry_diagnostics(sample_run):
    ce = sample_run.filter(pl.col("status") == "compile_error")
    assert ce.height >= 8
    for r in ce.iter_rows(named=True):
        assert r["diagnostics"], r["task_id"]
        assert r["diagnostics"][0]["severity"] in ("error", "fatal error", "linker")


def test_native_method_passes_with_speedup_near_one(tmp_path):
    """A/A: the tree's own kernels through the whole pipeline; the speedup is a ratio of two medians of the
    same code, so it must land near 1 (a broad band: this checks the plumbing, not the machine's noise)."""
    ids = ["argmax_axis1_keep_4d", "layernorm_last_3d", "tile_4d", "hard_sigmoid_4d"]
    extra = "[candidates]\nnative = true\n"
    cfg = load_config(_cfg(tmp_path, "native", extra), ["--tasks.ids", f'["{ids[0]}","{ids[1]}","{ids[2]}","{ids[3]}"]'])
    assert evaluate(cfg) == 0
    df = scan(cfg.run.dir).collect()
    assert df.height == len(ids)
    for r in df.iter_rows(named=True):
        assert r["status"] == "ok", (r["task_id"], r["error_message"])
        assert 0.5 < r["speedup"] < 2.0, (r["task_id"], r["speedup"])
