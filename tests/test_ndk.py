"""An Android NDK named in ``[target]``: validation by field, the digest and the build mode, the NDK's toolchain
file, ANDROID_* variables and clang in the cross build, and, end to end, the fixture engine built with an
NDK-shaped folder (its compilers wrap Debian's aarch64 cross g++) and verified under qemu."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from conftest_fixture import FIXTURE_ROOT
from crosstools import skip_without_cross_tools
from elftools.elf.elffile import ELFFile
from evalcfg import write_config
from fakendk import MARK, REVISION, make_fake_ndk

from kit.host.shipping import elf_arch
from kit.host.target import TargetError
from kit.mnn import build as mbuild
from kit.mnn import toolchain
from kit.outline.evaluate import evaluate
from kit.results.shards import scan
from kit.settings.config import ConfigError, load_config


def _cfg(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "c.toml"
    p.write_text(body)
    return p


def _ndk_cfg(tmp_path: Path, ndk: Path, extra: str = "") -> Path:
    return _cfg(tmp_path, f"[target]\narch = \"aarch64\"\nndk = \"{ndk}\"\n{extra}")


def test_an_ndk_that_is_not_there_or_not_an_ndk_is_refused_by_field(tmp_path):
    with pytest.raises(ConfigError, match=r"'target\.ndk'.*no such folder"):
        load_config(_ndk_cfg(tmp_path, tmp_path / "nowhere"))
    bare = make_fake_ndk(tmp_path / "bare", toolchain=False)
    with pytest.raises(ConfigError, match=r"'target\.ndk'.*android\.toolchain\.cmake not found"):
        load_config(_ndk_cfg(tmp_path, bare))
    ndk = make_fake_ndk(tmp_path / "ndk")
    with pytest.raises(ConfigError) as e:  # no compiler driver for that API level
        load_config(_ndk_cfg(tmp_path, ndk, "android_api = 30\n"))
    assert "'target.ndk'" in str(e.value) and "'target.android_api'" in str(e.value)
    assert "aarch64-linux-android30-clang++ not found" in str(e.value)
    with pytest.raises(ConfigError) as e:
        load_config(_cfg(tmp_path, f"[target]\nndk = \"{ndk}\"\n"))
    assert "'target.ndk'" in str(e.value) and "'target.arch'" in str(e.value)
    with pytest.raises(ConfigError, match=r"target\.android_abi"):
        load_config(_ndk_cfg(tmp_path, ndk, "android_abi = \"armeabi-v7a\"\n"))


def test_a_relative_ndk_is_resolved_against_the_config_file(tmp_path):
    make_fake_ndk(tmp_path / "sdk" / "ndk")
    cfg = load_config(_cfg(tmp_path, "[target]\narch = \"aarch64\"\nndk = \"sdk/ndk\"\n"))
    assert cfg.target.ndk == tmp_path / "sdk" / "ndk"


def test_the_ndk_is_in_the_digest_and_the_build_mode(tmp_path):
    ndk = make_fake_ndk(tmp_path / "ndk")
    debian = load_config(_cfg(tmp_path, "[target]\narch = \"aarch64\"\n"))
    cfg = load_config(_ndk_cfg(tmp_path, ndk))
    t = cfg.target_info()
    if t.host_arch != "x86_64":
        pytest.skip("a native aarch64 node builds without the NDK")
    assert t.build_mode == "cross-ndk" and t.describe()["build_mode"] == "cross-ndk"
    assert cfg.digest_payload()["target"]["ndk"] == {"revision": REVISION, "api": 21, "abi": "arm64-v8a"}
    assert cfg.digest() != debian.digest()
    # the path is not part of it (a run resumes with the NDK elsewhere); the revision is
    moved = load_config(_ndk_cfg(tmp_path, make_fake_ndk(tmp_path / "elsewhere")))
    assert moved.digest() == cfg.digest()
    before = cfg.digest()
    (ndk / "source.properties").write_text("Pkg.Revision = 27.0.1\n")
    assert load_config(_ndk_cfg(tmp_path, ndk)).digest() != before


def test_the_cross_build_uses_the_ndks_toolchain_file_android_variables_and_clang(tmp_path):
    ndk = make_fake_ndk(tmp_path / "ndk")
    t = load_config(_ndk_cfg(tmp_path, ndk)).target_info()
    if not t.cross:
        pytest.skip("a native aarch64 node builds without the NDK")
    argv = mbuild.cmake_command(mbuild.BuildOptions("mnn", tmp_path / "cache", target=t), tmp_path / "src")
    assert f"-DCMAKE_TOOLCHAIN_FILE={ndk / 'build' / 'cmake' / 'android.toolchain.cmake'}" in argv
    assert {"-DANDROID_ABI=arm64-v8a", "-DANDROID_PLATFORM=android-21", "-DANDROID_STL=c++_static",
            "-DMNN_USE_LOGCAT=OFF", "-DMNN_BUILD_SHARED_LIBS=OFF"} <= set(argv)
    assert not any("aarch64-linux-gnu.cmake" in a for a in argv)
    assert toolchain.cxx(t) == str(ndk / "toolchains/llvm/prebuilt/linux-x86_64/bin/aarch64-linux-android21-clang++")
    assert toolchain.build_reads(t) == [ndk]  # the confined build may read the whole NDK
    assert t.static  # linked -static as without an NDK (kit.host.target.Target.static says why)


def test_check_tools_names_the_ndk_field(tmp_path):
    ndk = make_fake_ndk(tmp_path / "ndk")
    t = load_config(_ndk_cfg(tmp_path, ndk)).target_info()
    if not t.cross:
        pytest.skip("a native aarch64 node builds without the NDK")
    (ndk / "build" / "cmake" / "android.toolchain.cmake").unlink()  # gone after the config was read
    with pytest.raises(TargetError, match=r"target\.ndk: .*android\.toolchain\.cmake not found"):
        toolchain.check_tools(t)


@pytest.mark.slow
def test_fixture_engine_built_with_the_ndk_is_verified_under_qemu(tmp_path, fixture_engine_pristine):
    skip_without_cross_tools()
    ndk = make_fake_ndk(tmp_path / "ndk")
    cfg_path = write_config(
        tmp_path / "ndk.toml", run_dir=tmp_path / "run", tasks_dir=FIXTURE_ROOT / "tasks",
        ids=["fx_argmax", "fx_exp"], method="sample", candidates=FIXTURE_ROOT / "candidates" / "sample",
        mnn={"engine": "fixture", "source_dir": fixture_engine_pristine, "cache_dir": tmp_path / "cache"},
        build={"jobs": 2}, verify={"trials": 2, "extra_trials": 1}, timing={"warmup": 1, "iterations": 2, "rounds": 2},
        target={"arch": "aarch64", "ndk": ndk})
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MKB_MNN__SOURCE_DIR", raising=False)
        cfg = load_config(cfg_path)
    assert evaluate(cfg) == 0
    df = scan(cfg.run.dir).collect()
    got = {f"{r['task_id']}/{r['sample_id']}": r["status"] for r in df.iter_rows(named=True)}
    expected = {"correct": "ok", "compile_error": "compile_error", "wrong_result": "verify_mismatch",
                "crash": "runtime_crash"}
    assert len(got) == 8 and all(v == expected[k.split("/")[1]] for k, v in got.items()), got
    assert set(df["build_mode"]) == {"cross-ndk"} and set(df["target_arch"]) == {"aarch64"}
    ok = df.filter(pl.col("status") == "ok")
    assert ok.height == 2 and ok["timing_emulated"].all()
    runners = [p for p in (cfg.mnn.cache_dir / "native").glob("*/bin/mkb_runner") if elf_arch(p.read_bytes()) == "aarch64"]
    assert len(runners) == 1
    with runners[0].open("rb") as f:  # linked by the NDK's compiler, statically
        elf = ELFFile(f)
        assert elf.get_section_by_name(".symtab").get_symbol_by_name(MARK)
        assert not any(seg["p_type"] == "PT_INTERP" for seg in elf.iter_segments())
