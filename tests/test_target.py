"""The [target] section, the target's derived facts, and how a cross build is configured (no build here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kit.host.target import TargetError, make_target
from kit.mnn import build as mbuild
from kit.mnn import targets as mtargets
from kit.mnn import toolchain
from kit.settings.config import ConfigError, load_config


def _cfg(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "c.toml"
    p.write_text(text)
    return p


def test_default_is_the_x86_64_host_and_keeps_the_digest(tmp_path):
    plain = load_config(_cfg(tmp_path, "[verify]\ntrials = 3\n"))
    explicit = load_config(_cfg(tmp_path, "[verify]\ntrials = 3\n[target]\narch = \"x86_64\"\n"))
    assert plain.target.arch == "x86_64" and "target" not in plain.digest_payload()
    assert plain.digest() == explicit.digest()


def test_aarch64_changes_the_digest_and_names_build_mode_and_device(tmp_path):
    cfg = load_config(_cfg(tmp_path, "[target]\narch = \"aarch64\"\n"))
    t = cfg.target_info()
    assert cfg.digest() != load_config(None).digest()
    if t.host_arch == "x86_64":
        assert cfg.digest_payload()["target"] == {"arch": "aarch64", "fp16": False, "build_mode": "cross",
                                                 "timing_device": "qemu"}
        assert t.describe() == {"target_arch": "aarch64", "build_mode": "cross", "timing_device": "qemu"}
    fp16 = load_config(_cfg(tmp_path, "[target]\narch = \"aarch64\"\nfp16 = true\n"))
    assert fp16.digest() != cfg.digest()


def test_unknown_architecture_names_the_field(tmp_path):
    with pytest.raises(ConfigError, match=r"target\.arch"):
        load_config(_cfg(tmp_path, "[target]\narch = \"arm64\"\n"))
    with pytest.raises(ConfigError, match=r"unknown key 'target\.archh'"):
        load_config(_cfg(tmp_path, "[target]\narchh = \"aarch64\"\n"))


def test_fp16_needs_aarch64_and_the_error_names_both_fields(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_config(_cfg(tmp_path, "[target]\nfp16 = true\n"))
    assert "'target.fp16'" in str(e.value) and "'target.arch'" in str(e.value)


def test_aarch64_timed_on_separate_ray_nodes_names_them_in_the_digest(tmp_path):
    split = load_config(_cfg(tmp_path, "[target]\narch = \"aarch64\"\n[dispatch]\nmode = \"ray\"\n"
                                       "build_resource = \"b\"\ntiming_resource = \"a\"\n"))
    here = load_config(_cfg(tmp_path, "[target]\narch = \"aarch64\"\n"))
    assert split.digest_payload()["target"]["timing_device"] == "ray:a" and split.digest() != here.digest()


def test_build_mode_follows_the_host():
    on_x86 = make_target("aarch64", host_arch="x86_64")
    assert on_x86.cross and on_x86.emulated and on_x86.static and on_x86.timing_device == "qemu"
    on_arm = make_target("aarch64", host_arch="aarch64")
    assert not on_arm.cross and on_arm.build_mode == "native" and on_arm.timing_device == "host"
    assert make_target("aarch64", timing_resource="arm", host_arch="x86_64").timing_device == "ray:arm"
    with pytest.raises(TargetError, match="target.arch = 'x86_64': this host is aarch64"):
        make_target("x86_64", host_arch="aarch64").check()


def test_cross_configure_uses_the_toolchain_file_and_a_static_runtime(tmp_path):
    opts = mbuild.BuildOptions(engine="mnn", cache_dir=tmp_path, ccache=False,
                               target=make_target("aarch64", host_arch="x86_64"))
    argv = mbuild.cmake_command(opts, Path("SRC"))
    assert f"-DCMAKE_TOOLCHAIN_FILE={toolchain.TOOLCHAIN_FILES['aarch64']}" in argv
    assert {"-DMNN_BUILD_CONVERTER=OFF", "-DMNN_BUILD_SHARED_LIBS=OFF", "-DMNN_SEP_BUILD=OFF", "-DMNN_ARM82=OFF"} <= set(argv)
    assert mtargets.native_targets("mnn", opts.target) == ["MNN"]  # no converter: the host's converts
    fp16 = mbuild.BuildOptions(engine="mnn", cache_dir=tmp_path, target=make_target("aarch64", True, host_arch="x86_64"))
    assert "-DMNN_ARM82=ON" in mbuild.cmake_command(fp16, Path("SRC"))
    host = opts.host()
    assert not host.target.cross and "-DMNN_BUILD_CONVERTER=ON" in mbuild.cmake_command(host, Path("SRC"))
    assert toolchain.TOOLCHAIN_FILES["aarch64"].is_file()


def test_emulator_is_called_explicitly_with_the_sysroot():
    t = make_target("aarch64", host_arch="x86_64")
    try:
        prefix = toolchain.emulator(t)
    except TargetError as exc:
        assert "qemu-user-static" in str(exc)
        return
    assert Path(prefix[0]).name == "qemu-aarch64-static" and prefix[1:] == ("-L", "/usr/aarch64-linux-gnu")
    assert toolchain.emulator(make_target("x86_64", host_arch="x86_64")) == ()
