"""A failed native build says why in one line (kit.mnn.buildfail): the first real error of the build's output,
a hint where one is known, the whole output kept in a file of the workspace."""

from __future__ import annotations

import os
import pickle
import re
import shutil
from pathlib import Path

import pytest
from test_buildwatch import hanging_ninja

from kit.mnn import build as mbuild
from kit.mnn import buildfail
from kit.mnn.native import NativeBuildError, ensure_native
from kit.mnn.source import ensure_pristine
from kit.mnn.workspace import open_workspace
from kit.settings.config import EvalConfig

# -- the first real error of an output (unit) ------------------------------------------------------------------
#: what a user saw on a fresh machine (abridged): the cause 60 lines above ninja's summary
USER_LOG = """[25/750] Building CXX object CMakeFiles/MNNCore.dir/source/core/Tensor.cpp.o
FAILED: CMakeFiles/MNNCore.dir/source/core/Tensor.cpp.o
ccache /usr/bin/c++ -O3 -c /root/.cache/mkb/workspaces/mnn-1/w0/src/source/core/Tensor.cpp
ccache: error: Failed to create directory /root/.cache/mkb/ccache/tmp: Read-only file system
[26/750] Building CXX object CMakeFiles/MNNCore.dir/source/core/Backend.cpp.o
FAILED: CMakeFiles/MNNCore.dir/source/core/Backend.cpp.o
ccache: error: Failed to create directory /root/.cache/mkb/ccache/tmp: Read-only file system
ninja: build stopped: cannot make progress due to previous errors.
"""


def test_the_cause_is_the_first_real_error_not_ninjas_summary():
    cache = Path("/root/.cache/mkb")
    line = buildfail.failure_line("native MNN build", USER_LOG, cache)
    assert line == ("native MNN build failed: ccache: error: Failed to create directory /root/.cache/mkb/ccache/tmp: "
                    "Read-only file system; ccache cannot write its folder /root/.cache/mkb/ccache: make it a "
                    "writable folder, point mnn.cache_dir elsewhere, or set build.ccache = false")
    assert "\n" not in line


@pytest.mark.parametrize("output, error, advice", [
    ("[1/9] Building CXX object a.o\nFAILED: a.o\n/x/ccache /usr/bin/c++ -c a.cpp\n/bin/sh: 1: /x/ccache: not found\n"
     "ninja: build stopped: subcommand failed.\n",
     "/bin/sh: 1: /x/ccache: not found", "/x/ccache does not exist: check the programs mnn.cmake_args names"),
    ("/bin/sh: 1: c++: not found\n", "/bin/sh: 1: c++: not found", "install c++ (Debian: apt-get install g++)"),
    ("FAILED: a.o\nIn file included from /w/src/source/core/Net.hpp:3,\n                 from /w/src/x.cpp:2:\n"
     "/w/src/source/core/Net.cpp:12:5: warning: unused variable\n/w/src/source/core/Net.cpp:40:1: error: expected "
     "';' before '}' token\n   40 | }\n/w/src/source/core/Net.cpp:41:1: error: second\n",
     "source/core/Net.cpp:40: error: expected ';' before '}' token", "the pristine tree does not compile"),
    ("-- The CXX compiler identification is unknown\nCMake Error at CMakeLists.txt:6 (project):\n"
     "  No CMAKE_CXX_COMPILER could be found.\n\n  Tell CMake where to find the compiler by setting either the "
     "environment\n\n-- Configuring incomplete, errors occurred!\n",
     "CMake Error at CMakeLists.txt:6 (project): No CMAKE_CXX_COMPILER could be found.",
     "install c++ (Debian: apt-get install g++)"),
    ("CMake Error at /usr/share/cmake-3.25/Modules/CMakeDetermineCXXCompiler.cmake:48 (message):\n"
     "  Could not find compiler set in environment variable CXX:\n\n  /nonexistent/g++.\n\nCall Stack (most recent "
     "call first):\n", "CMake Error at /usr/share/cmake-3.25/Modules/CMakeDetermineCXXCompiler.cmake:48 (message): "
     "Could not find compiler set in environment variable CXX: /nonexistent/g++.", "install c++"),
    ("-- The CXX compiler identification is unknown\nCMake Error at CMakeLists.txt:6 (project):\n  The "
     "CMAKE_CXX_COMPILER:\n\n    /nonexistent/g++\n\n  is not a full path to an existing compiler tool.\n\n  Tell "
     "CMake where to find the compiler by setting either the environment\n\n\n-- Configuring incomplete\n",
     "CMake Error at CMakeLists.txt:6 (project): The CMAKE_CXX_COMPILER: /nonexistent/g++ is not a full path to an "
     "existing compiler tool.", "check the compiler mnn.cmake_args names"),
    ('CMake Error: CMake was unable to find a build program corresponding to "Ninja".  CMAKE_MAKE_PROGRAM is not '
     'set.\nCMake Error: CMAKE_CXX_COMPILER not set, after EnableLanguage\n',
     'CMake Error: CMake was unable to find a build program corresponding to "Ninja". CMAKE_MAKE_PROGRAM is not set.',
     "install ninja (Debian: apt-get install ninja-build)"),
    ("FAILED: libMNN.so\n/usr/bin/ld: CMakeFiles/MNN.dir/a.o: in function `f':\na.cpp:(.text+0x1): undefined "
     "reference to `g()'\ncollect2: error: ld returned 1 exit status\n",
     "a.cpp:(.text+0x1): undefined reference to `g()'", ""),
    ("FAILED: big.o\nc++: fatal error: Killed signal terminated program cc1plus\ncompilation terminated.\n",
     "c++: fatal error: Killed signal terminated program cc1plus", "the compiler ran out of memory"),
])
def test_first_error_and_its_hint(output: str, error: str, advice: str):
    assert buildfail.first_error(output, Path("/w/src")) == error
    assert buildfail.hint(error, Path("/c")).startswith(advice) if advice else buildfail.hint(error, Path("/c")) == ""


def test_without_a_recognisable_error_the_exit_and_the_last_line_that_is_not_ninjas_summary():
    out = "[1/2] Generating x\nFAILED: x\nsomething odd happened\nninja: build stopped: subcommand failed.\n"
    assert buildfail.failure_line("cmake", out, Path("/c"), exit_code=1) == (
        "cmake failed (exit 1) with no compiler or tool error in its output; its last line: something odd happened")


def test_timeout_lines():
    assert buildfail.timeout_line("native MNN build", 1203.4, 505, 750, True, 600) == (
        "native MNN build timed out after 1203 s at step 505/750 (no step finished in 600 s); if the machine is "
        "only slow or busy, raise build.stall_timeout_s")
    assert buildfail.timeout_line("native MNN build", 1200.2, 505, 0, False, 1200) == (
        "native MNN build timed out after 1200 s at step 505 (build.timeout_s = 1200 s)")


def test_the_errors_survive_pickling_with_their_cause_and_log(tmp_path: Path):
    """Ray ships a worker's setup error to the driver by pickle."""
    for cls in (NativeBuildError, mbuild.ConfigureError):
        exc = pickle.loads(pickle.dumps(cls("native MNN build failed: x", tmp_path / "build-failed.log")))
        assert exc.cause == "native MNN build failed: x" and exc.log == tmp_path / "build-failed.log"
        assert str(exc).splitlines()[0] == "native MNN build failed: x" and str(tmp_path) in str(exc)


# -- the native build of the fixture engine, made to fail (real cmake and g++) ------------------------------------
needs_toolchain = pytest.mark.skipif(
    not (shutil.which("cmake") and shutil.which("ninja") and shutil.which("g++")), reason="needs cmake, ninja and g++"
)


def native_failure(tmp_path: Path, engine: Path, **options: object) -> NativeBuildError:
    """The NativeBuildError of the native build of the tree ``engine`` (a fixture engine copy), with ``options``
    for :class:`kit.mnn.build.BuildOptions`; fails the test when it builds."""
    cache = tmp_path / "cache"
    cfg = EvalConfig(mnn={"source_dir": engine, "cache_dir": cache, "engine": "fixture"})
    pristine = ensure_pristine(cfg.mnn)
    ws = open_workspace(cache / "ws", pristine)
    opts = mbuild.BuildOptions(**{"engine": "fixture", "cache_dir": cache, "jobs": 2, "ccache": False, **options})
    try:
        with pytest.raises(NativeBuildError) as caught:
            ensure_native(opts, pristine, ws)
    finally:
        ws.release()
    return caught.value


def tools_without(folder: Path, *absent: str) -> str:
    """A PATH of ``folder`` holding links to the programs a build runs, but not ``absent``."""
    folder.mkdir()
    for prog in ("cmake", "ninja", "c++", "g++", "cc", "sh", "ccache"):
        if prog not in absent and (found := shutil.which(prog)):
            (folder / prog).symlink_to(found)
    return str(folder)


def test_a_missing_ninja_is_said_before_anything_is_built(tmp_path, fixture_engine, monkeypatch):
    path = tools_without(tmp_path / "bin", "ninja")
    monkeypatch.setenv("PATH", path)
    exc = native_failure(tmp_path, fixture_engine)
    assert exc.cause == (f"native fixture build needs ninja, not found on PATH ({path}): install ninja (Debian: "
                         f"apt-get install ninja-build)")
    assert str(exc) == exc.cause and exc.log is None
    assert not list((tmp_path / "cache" / "ws").glob("*/build/CMakeCache.txt"))  # not even configured


@pytest.mark.slow
@needs_toolchain
def test_a_compiler_launcher_that_does_not_exist(tmp_path, fixture_engine):
    exc = native_failure(tmp_path, fixture_engine, cmake_args=("-DCMAKE_CXX_COMPILER_LAUNCHER=/nonexistent/ccache",))
    assert exc.cause == ("native fixture build failed: /bin/sh: 1: /nonexistent/ccache: not found; "
                         "/nonexistent/ccache does not exist: check the programs mnn.cmake_args names")
    assert exc.log is not None and exc.log.name == "build-failed.log" and str(exc.log) in str(exc)
    assert "ninja: build stopped" in exc.log.read_text()  # the whole output, kept in the workspace


@pytest.mark.slow
@needs_toolchain
@pytest.mark.skipif(not shutil.which("ccache"), reason="needs ccache")
def test_a_ccache_folder_that_cannot_be_written(tmp_path, fixture_engine):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "ccache").write_text("a file where ccache's folder should be")
    exc = native_failure(tmp_path, fixture_engine, ccache=True)
    ccache_dir = tmp_path / "cache" / "ccache"
    assert exc.cause == (f"native fixture build failed: ccache: error: Failed to create directory {ccache_dir}/tmp: "
                         f"Not a directory; ccache cannot write its folder {ccache_dir}: make it a writable folder, "
                         f"point mnn.cache_dir elsewhere, or set build.ccache = false")


@pytest.mark.slow
@needs_toolchain
def test_a_syntax_error_in_the_pristine_tree(tmp_path, fixture_engine):
    net = fixture_engine / "source" / "core" / "Net.cpp"
    lines = net.read_text().splitlines()
    net.write_text("\n".join(lines + ["int mkb_broken() { return 1 }"]) + "\n")
    exc = native_failure(tmp_path, fixture_engine)
    quoted = exc.cause.replace("\u2018", "'").replace("\u2019", "'")  # g++ quotes in UTF-8 locales
    assert quoted == (f"native fixture build failed: source/core/Net.cpp:{len(lines) + 1}: error: expected ';' "
                      f"before '}}' token; the pristine tree does not compile with this compiler: check "
                      f"mnn.source_dir (or mnn.version) and the compiler (c++ --version)")


@pytest.mark.slow
@needs_toolchain
def test_a_build_that_hangs_is_stopped_by_the_stall_limit_at_its_step(tmp_path, fixture_engine, monkeypatch):
    monkeypatch.setenv("PATH", f"{hanging_ninja(tmp_path / 'bin')}:{os.environ['PATH']}")
    exc = native_failure(tmp_path, fixture_engine, stall_timeout_s=1.0)
    assert re.fullmatch(r"native fixture build timed out after \d s at step 1/\d\d \(no step finished in 1 s\); if "
                        r"the machine is only slow or busy, raise build.stall_timeout_s", exc.cause), exc.cause
    assert exc.log is not None and "[1/2] Building CXX object fake.o" in exc.log.read_text()


#: a ninja killed by SIGKILL from outside after the build's first step (what the out-of-memory killer does)
KILLED_NINJA = """#!/bin/sh
case " $* " in
  *" -k "*) printf '0\\t10\\t0\\tfake.o\\tdeadbeef\\n' >> .ninja_log
            echo "[1/2] Building CXX object fake.o"
            kill -KILL $$ ;;
esac
exec {real} "$@"
"""


@needs_toolchain
def test_a_build_killed_from_outside_says_so_at_its_step(tmp_path, fixture_engine, monkeypatch):
    """A ninja ended by a signal the kit did not send has no error in its output: the line names the signal and
    the step, not 'no compiler or tool error' (a copied cache's worker once killed a live build that way)."""
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "ninja"
    fake.write_text(KILLED_NINJA.format(real=shutil.which("ninja")))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    exc = native_failure(tmp_path, fixture_engine)
    assert re.fullmatch(r"native fixture build was killed by signal 9 at step 1/\d\d, from outside the build .*",
                        exc.cause), exc.cause


@needs_toolchain
def test_a_failed_configure(tmp_path, fixture_engine):
    exc = native_failure(tmp_path, fixture_engine, cmake_args=("-DCMAKE_CXX_COMPILER=/nonexistent/g++",))
    build_dir = tmp_path / "cache" / "ws" / "w0" / "build"
    assert exc.cause == (f"native fixture build: cmake (in {build_dir}) failed: CMake Error at CMakeLists.txt:6 "
                         f"(project): The CMAKE_CXX_COMPILER: /nonexistent/g++ is not a full path to an existing "
                         f"compiler tool; check the compiler mnn.cmake_args names (CMAKE_CXX_COMPILER, "
                         f"CMAKE_C_COMPILER)")
    assert exc.log == build_dir.parent / "configure-failed.log" and "Configuring incomplete" in exc.log.read_text()
