"""The kit's trim of MNN's converter build (:mod:`kit.mnn.converter`): configured by real CMake on a small
project of our own with MNN's target names (the real tree's build is checked in tests/test_mnn_real.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from kit.host import proc, sandbox, sandbox_check
from kit.host.target import make_target
from kit.mnn import build as mbuild
from kit.mnn import converter, native

pytestmark = pytest.mark.skipif(not (proc.which("cmake") and proc.which("ninja")), reason="needs cmake and ninja")

X86 = make_target("x86_64", host_arch="x86_64")
ARM = make_target("aarch64", host_arch="x86_64")

# the target layout of MNN 3.2.2's converter, reduced to one file per library (our own sources)
_CMAKE = """cmake_minimum_required(VERSION 3.6)
project(MNN CXX)
include_directories(include schema/current)
add_library(MNN SHARED core.cpp)
add_library(MNNConverterTF OBJECT tf/TfFront.cpp)
add_library(MNNConverterONNX OBJECT onnx/OnnxFront.cpp)
add_library(MNNConverterOpt OBJECT optimizer/onnxextra/OnnxPass.cpp optimizer/tfextra/TfPass.cpp)
add_library(MNNConvertDeps SHARED common/cli.cpp $<TARGET_OBJECTS:MNNConverterTF> $<TARGET_OBJECTS:MNNConverterONNX>
            $<TARGET_OBJECTS:MNNConverterOpt>)
add_executable(MNNConvert main.cpp)
target_link_libraries(MNNConvert MNNConvertDeps MNN)
"""
_SOURCES = {
    "core.cpp": "int mnnCore() { return 1; }\n",
    "tf/TfFront.cpp": "#error the TensorFlow front end must not be compiled\n",
    "onnx/OnnxFront.cpp": "int onnxFront() { return 2; }\n",
    "optimizer/onnxextra/OnnxPass.cpp": "int onnxPass() { return 3; }\n",
    "optimizer/tfextra/TfPass.cpp": "#error the TensorFlow passes must not be compiled\n",
    "common/cli.cpp": "#include <memory>\n#include <string>\nnamespace MNN { struct NetT {}; }\n"
                      "int tensorflow2MNNNet(const std::string, const std::string, std::unique_ptr<MNN::NetT>&);\n"
                      "int cli() { std::unique_ptr<MNN::NetT> n; return tensorflow2MNNNet(\"m.pb\", \"MNN\", n); }\n",
    "main.cpp": "int cli(); int main() { return cli() == 1 ? 0 : 3; }\n",
    # what the trim's precompiled header includes, as one-line headers of our own
    **{h: "#pragma once\n" for h in ("include/MNN/MNNDefine.h", "schema/current/MNN_generated.h",
                                     "include/MNN/expr/Expr.hpp", "include/MNN/expr/ExprCreator.hpp",
                                     "include/MNN/expr/MathOp.hpp", "include/MNN/expr/NeuralNetWorkOp.hpp",
                                     "tools/converter/source/onnx/onnxOpConverter.hpp")},
}


def _write_project(src: Path) -> None:
    for rel, text in {"CMakeLists.txt": _CMAKE, **_SOURCES}.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)


@pytest.fixture(scope="module")
def trimmed(tmp_path_factory) -> Path:
    """A configured build of the small project with the kit's trim, built; its build directory."""
    root = tmp_path_factory.mktemp("trim")
    src = root / "src"
    _write_project(src)
    build = root / "build"
    build.mkdir()
    res = proc.run(["cmake", "-G", "Ninja", str(src), *converter.cmake_args()], cwd=build, timeout_s=120)
    assert res.ok, res.output[-3000:]
    res = proc.run(["ninja", "MNNConvert"], cwd=build, timeout_s=300)
    assert res.ok, res.output[-3000:]
    return build


def test_the_converter_links_without_the_frontends_the_kit_does_not_use(trimmed):
    # the TF sources hold #error: the build above passed only because they were left out
    commands = proc.run(["ninja", "-t", "commands", "MNNConvert"], cwd=trimmed, timeout_s=60).stdout
    assert "TfFront" not in commands and "TfPass" not in commands
    assert "OnnxFront" in commands and "OnnxPass" in commands and "frontends_absent" in commands


def test_the_absent_frontend_fails_with_a_message(trimmed):
    res = proc.run([str(trimmed / "MNNConvert")], cwd=trimmed, timeout_s=30)
    assert res.returncode == 0  # main() checks that the entry point returned the failure code 1
    assert "converts ONNX only: no TensorFlow front end" in res.output


def test_only_the_converter_gets_the_converter_opt_level(trimmed):
    lines = proc.run(["ninja", "-t", "commands", "MNNConvert"], cwd=trimmed, timeout_s=60).stdout.splitlines()
    lines = [line for line in lines if " -c " in line]  # the compile commands (a link has no -O)
    opt = converter.CONVERTER_OPT
    assert all(opt in line.split() for line in lines if "OnnxFront" in line or "OnnxPass" in line or "cli.cpp" in line)
    assert all(opt not in line.split() for line in lines if "core.cpp" in line)  # the timed library: MNN's flags


def test_only_the_converter_compiles_with_the_precompiled_header(trimmed):
    lines = proc.run(["ninja", "-t", "commands", "MNNConvert"], cwd=trimmed, timeout_s=60).stdout.splitlines()
    compiles = {name: [line for line in lines if " -c " in line and f"/{name}" in line]
                for name in ("OnnxFront.cpp", "OnnxPass.cpp", "cli.cpp", "core.cpp")}
    assert all(len(found) == 1 for found in compiles.values()), compiles
    assert converter.CONVERTER_PCH
    for name in ("OnnxFront.cpp", "OnnxPass.cpp", "cli.cpp"):
        assert "cmake_pch.hxx" in compiles[name][0], name
    assert "cmake_pch" not in compiles["core.cpp"][0]  # the timed library: exactly MNN's own command


def test_native_mnn_builds_trim_the_converter_cross_builds_have_none(tmp_path):
    host = mbuild.cmake_command(mbuild.BuildOptions(engine="mnn", cache_dir=tmp_path, target=X86), Path("SRC"))
    cross = mbuild.cmake_command(mbuild.BuildOptions(engine="mnn", cache_dir=tmp_path, target=ARM), Path("SRC"))
    fixture = mbuild.cmake_command(mbuild.BuildOptions(engine="fixture", cache_dir=tmp_path, target=X86), Path("SRC"))
    assert f"-DCMAKE_PROJECT_MNN_INCLUDE={converter.TRIM_CMAKE}" in host
    assert not any("CMAKE_PROJECT_MNN_INCLUDE" in a for a in cross + fixture)
    assert "converts" not in converter.build_flags("mnn", True) and "ONNX front end only" in converter.build_flags("mnn", False)


def test_the_native_key_counts_the_trim_by_content_not_path(tmp_path):
    arg = f"-DCMAKE_PROJECT_MNN_INCLUDE={converter.TRIM_CMAKE}"
    sha = hashlib.sha256(converter.TRIM_CMAKE.read_bytes()).hexdigest()[:16]
    assert native._by_content(arg) == f"-DCMAKE_PROJECT_MNN_INCLUDE=sha256:{sha}"
    assert native._by_content("-DMKB_CONVERTER_OPT=-O1") == "-DMKB_CONVERTER_OPT=-O1"
    assert native._by_content("-DMNN_BUILD_TOOLS=ON") == "-DMNN_BUILD_TOOLS=ON"


@pytest.mark.skipif(bool(sandbox_check.bwrap_works()), reason="needs a working bubblewrap")
def test_a_sandboxed_build_sees_the_trim(tmp_path):
    """The build's sandbox shows the workspace and what BuildOptions.confine lists: the trim's files among them
    (without them cmake failed with 'project could not find requested file: .../trim.cmake')."""
    root = tmp_path / "ws"
    ws = SimpleNamespace(root=root, src=root / "src", build=root / "build")  # what confine reads of a Workspace
    _write_project(ws.src)
    opts = mbuild.BuildOptions(engine="mnn", cache_dir=tmp_path / "cache", target=X86,
                               policy=sandbox.Policy(enabled=True), ccache=False)
    box = opts.confine(ws)
    assert str(converter.HERE) in box.view.ro
    res = proc.run(["cmake", "-G", "Ninja", str(ws.src), *converter.cmake_args()], cwd=ws.build, timeout_s=120,
                   confine=box)
    assert res.ok, res.output[-3000:]
    res = proc.run(["ninja", "MNNConvert"], cwd=ws.build, timeout_s=300, confine=box)
    assert res.ok, res.output[-3000:]


@pytest.mark.skipif(not proc.which("ccache"), reason="needs ccache")
def test_a_second_workspace_gets_the_precompiled_compiles_from_ccache(tmp_path):
    """A second workspace's first build takes the converter's objects from ccache, as it takes the libraries'
    (a compile with a precompiled header is one ccache refuses to cache unless the kit's build environment
    allows it: then every worker after the first would compile the converter afresh)."""
    cache = tmp_path / "cache"
    (cache / "ccache").mkdir(parents=True)
    for ws in ("w0", "w1"):
        src, build = tmp_path / ws / "src", tmp_path / ws / "build"
        _write_project(src)
        build.mkdir()
        env = mbuild.build_env(cache, tmp_path / ws)
        launcher = ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
        res = proc.run(["cmake", "-G", "Ninja", str(src), *converter.cmake_args(), *launcher], cwd=build, env=env,
                       timeout_s=120)
        assert res.ok, res.output[-3000:]
        if ws == "w1":
            proc.run(["ccache", "--zero-stats"], env=env, timeout_s=30)
        res = proc.run(["ninja", "MNNConvert"], cwd=build, env=env, timeout_s=300)
        assert res.ok, res.output[-3000:]
    stats = proc.run(["ccache", "--print-stats"], env=env, timeout_s=30).stdout
    counts = dict(line.split("\t", 1) for line in stats.splitlines() if "\t" in line)
    hits = int(counts["direct_cache_hit"]) + int(counts["preprocessed_cache_hit"])
    misses = int(counts["cache_miss"])
    uncacheable = {k: v for k, v in counts.items() if k.startswith(("could_not_use", "unsupported")) and v != "0"}
    assert not uncacheable, uncacheable
    assert misses == 0 and hits >= 4, counts  # the three converter sources with the header, and the library's
