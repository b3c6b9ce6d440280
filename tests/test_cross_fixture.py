"""The fixture engine cross-built for aarch64 and verified under qemu, end to end (real cross compiler, real
qemu-aarch64-static; CI installs both): the sample set ends as on x86, the NEON samples pass for aarch64 and fail
to compile for x86, every record names its target, and no emulated timing is scored."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import polars as pl
import pytest
from conftest_fixture import FIXTURE_ROOT
from crosstools import skip_without_cross_tools
from elftools.elf.elffile import ELFFile
from evalcfg import write_config

from kit.host import sandbox_check
from kit.host.shipping import elf_arch
from kit.outline.evaluate import evaluate
from kit.results.shards import scan
from kit.score.metrics import fast_col, summary
from kit.settings.config import load_config
from kit.suite.tasks import load_suite

pytestmark = pytest.mark.slow

SAMPLE_EXPECTED = {"correct": "ok", "compile_error": "compile_error", "wrong_result": "verify_mismatch",
                   "crash": "runtime_crash"}
NEON_EXPECTED = tomllib.loads((FIXTURE_ROOT / "candidates" / "expected_neon.toml").read_text())


def _load(path: Path, overrides: list[str] | None = None):
    """The config at ``path``; a real tree named in the environment (MKB_MNN__SOURCE_DIR, for the mnn tests)
    would override its fixture engine."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MKB_MNN__SOURCE_DIR", raising=False)
        return load_config(path, overrides or [])


def _config(tmp: Path, engine: Path, arch: str, sources: list[str] | dict[str, Path], ids: tuple[str, ...] = ()) -> Path:
    """The cross config: ``sources`` are the fixture's candidate sets by name, or method → folder."""
    where = sources if isinstance(sources, dict) else {s: FIXTURE_ROOT / "candidates" / s for s in sources}
    first, *rest = where
    return write_config(
        tmp / f"{arch}.toml", run_dir=tmp / arch, tasks_dir=FIXTURE_ROOT / "tasks", ids=list(ids), method=first,
        candidates=where[first], more_sources={s: where[s] for s in rest},
        mnn={"engine": "fixture", "source_dir": engine, "cache_dir": tmp / "cache"}, build={"jobs": 2},
        verify={"trials": 2, "extra_trials": 1}, timing={"warmup": 1, "iterations": 4, "rounds": 2},
        target={"arch": arch})


@pytest.fixture(scope="module")
def cross_run(tmp_path_factory, fixture_engine_pristine):
    skip_without_cross_tools()
    tmp = tmp_path_factory.mktemp("cross")
    cfg = _load(_config(tmp, fixture_engine_pristine, "aarch64", ["sample", "neon"]))
    assert evaluate(cfg) == 0
    return cfg, scan(cfg.run.dir).collect()


def _statuses(df: pl.DataFrame, method: str) -> dict[str, str]:
    return {f"{r['task_id']}/{r['sample_id']}": r["status"] for r in df.filter(pl.col("method") == method).iter_rows(named=True)}


def test_sample_set_cross_built_and_verified_under_qemu_ends_as_on_x86(cross_run):
    _, df = cross_run
    got = _statuses(df, "sample")
    assert len(got) == 16
    wrong = {k: v for k, v in got.items() if v != SAMPLE_EXPECTED[k.split("/")[1]]}
    assert not wrong, wrong


def test_neon_samples_pass_for_aarch64(cross_run):
    _, df = cross_run
    assert _statuses(df, "neon") == NEON_EXPECTED["aarch64"]


def test_records_name_the_target_and_emulated_timings_are_never_scored(cross_run):
    cfg, df = cross_run
    assert set(df["target_arch"]) == {"aarch64"} and set(df["build_mode"]) == {"cross"}
    assert set(df["timing_device"]) == {"qemu"}
    # the emulated runs ran in the same sandbox as host runs (qemu and its sysroot under the read-only /usr)
    assert df.filter(pl.col("status") != "rejected_input")["sandboxed"].all() == (sandbox_check.bwrap_works() == "")
    ok = df.filter(pl.col("status") == "ok")
    assert ok.height == 7 and ok["timing_emulated"].all()
    timed = ok.filter(pl.col("speedup").is_not_null())
    assert timed.height >= 5  # measured and kept, but never scored
    assert (timed["native_invocation_sha256"] == timed["candidate_invocation_sha256"]).all()
    tasks = load_suite(cfg.tasks.dir)
    s = summary(df, tasks).filter(pl.col("method") == "sample").row(0, named=True)
    # every task has a correct sample timed only under emulation (fx_sub has no native side: timed, no speedup)
    assert s["fcr"] == 1.0 and s[fast_col(0.0)] == 0.0 and s["n_emulated"] == 4 and s["geomean_speedup"] is None


def test_native_runner_is_a_static_aarch64_binary(cross_run):
    cfg, _ = cross_run
    runners = list((cfg.mnn.cache_dir / "native").glob("*/bin/mkb_runner"))
    arches = {elf_arch(p.read_bytes(), str(p)) for p in runners}
    assert arches == {"aarch64", "x86_64"}  # the target's and the host's (whose converter converts)
    arm = next(p for p in runners if elf_arch(p.read_bytes()) == "aarch64")
    with arm.open("rb") as f:
        assert not any(seg["p_type"] == "PT_INTERP" for seg in ELFFile(f).iter_segments())  # no dynamic loader


def test_neon_samples_fail_to_compile_for_x86(tmp_path, fixture_engine_pristine):
    cfg = _load(_config(tmp_path, fixture_engine_pristine, "x86_64", ["neon"]))
    assert evaluate(cfg) == 0
    df = scan(cfg.run.dir).collect()
    assert _statuses(df, "neon") == NEON_EXPECTED["x86_64"]
    assert all("arm_neon.h" in r["error_message"] for r in df.iter_rows(named=True))
    assert set(df["build_mode"]) == {"native"} and not df["timing_emulated"].any()


def test_a_dropped_registration_fails_the_static_runners_link(tmp_path, fixture_engine_pristine):
    """libMNN.a allows undefined symbols; the whole-archive link of the static runner does not."""
    skip_without_cross_tools()
    cands = tmp_path / "cands" / "fx_argmax" / "link_error"
    shutil.copytree(FIXTURE_ROOT / "candidates" / "sample" / "fx_argmax" / "correct", cands)
    src = (cands / "CPUArgMax.cpp").read_text()
    (cands / "CPUArgMax.cpp").write_text(src.replace("ErrorCode CPUArgMax::onExecute", "ErrorCode helperNeverDefined();\n"
                                                     "ErrorCode CPUArgMax::onExecute", 1)
                                         .replace("const Tensor* x = inputs[0];", "helperNeverDefined();\n    const Tensor* x = inputs[0];", 1))
    cfg = _load(_config(tmp_path, fixture_engine_pristine, "aarch64", {"s": tmp_path / "cands"}, ("fx_argmax",)))
    assert evaluate(cfg) == 0
    r = scan(cfg.run.dir).collect().row(0, named=True)
    assert r["status"] == "compile_error" and r["error_kind"] == "linker", r["error_message"]
    assert "helperNeverDefined" in r["error_message"]


def test_a_libc_function_defined_in_a_static_build_is_rejected(tmp_path, fixture_engine_pristine):
    """A static runtime has no shared library to screen: the candidate's own objects are (expf would replace
    libc's for the whole runner)."""
    skip_without_cross_tools()
    cands = tmp_path / "cands" / "fx_exp" / "defines_expf"
    shutil.copytree(FIXTURE_ROOT / "candidates" / "sample" / "fx_exp" / "correct", cands)
    src = (cands / "CPUUnary.cpp").read_text()
    (cands / "CPUUnary.cpp").write_text(src + '\nextern "C" float expf(float x) { return 1.0f + x; }\n')
    cfg = _load(_config(tmp_path, fixture_engine_pristine, "aarch64", {"s": tmp_path / "cands"}, ("fx_exp",)))
    assert evaluate(cfg) == 0
    r = scan(cfg.run.dir).collect().row(0, named=True)
    assert r["status"] == "rejected_input" and r["error_kind"] == "forbidden", r["error_message"]
    assert "expf" in r["error_message"]
