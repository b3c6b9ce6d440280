"""An Android-NDK-shaped folder for tests (no NDK can be downloaded here): the NDK's layout, a CMake toolchain
file at ``build/cmake/android.toolchain.cmake`` that insists on the ``ANDROID_*`` variables an NDK build is given,
and ``aarch64-linux-android<API>-clang++`` / ``-clang`` that wrap Debian's aarch64 cross compilers.  What the
wrappers link carries the absolute symbol :data:`MARK`, so a test can tell a binary they linked."""

from __future__ import annotations

from pathlib import Path

#: the symbol every executable the fake NDK's compilers link defines
MARK = "mkb_fake_ndk_linked"
REVISION = "0.0.1-fake"

_TOOLCHAIN = """# NDK-shaped stand-in (kit tests): Linux/aarch64 with the NDK's compiler names, refusing a build that was
# not given the ANDROID_* variables of an NDK build
foreach(var ANDROID_ABI ANDROID_PLATFORM ANDROID_STL)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "fake NDK: ${var} not given")
  endif()
endforeach()
if(NOT ANDROID_ABI STREQUAL "arm64-v8a")
  message(FATAL_ERROR "fake NDK: ANDROID_ABI ${ANDROID_ABI} is not arm64-v8a")
endif()
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES ANDROID_ABI ANDROID_PLATFORM ANDROID_STL)
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
get_filename_component(_fake_ndk "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
string(REPLACE "android-" "" _fake_api "${ANDROID_PLATFORM}")
set(_fake_bin "${_fake_ndk}/toolchains/llvm/prebuilt/linux-x86_64/bin")
set(CMAKE_C_COMPILER "${_fake_bin}/aarch64-linux-android${_fake_api}-clang")
set(CMAKE_CXX_COMPILER "${_fake_bin}/aarch64-linux-android${_fake_api}-clang++")
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
"""

_WRAPPER = """#!/bin/sh
# NDK-shaped stand-in (kit tests): Debian's cross compiler; what it links defines {mark}.  ccache takes a
# compiler named clang for clang and adds clang's colour option, which g++ does not know: dropped
link=1
for a in "$@"; do
  shift
  case "$a" in
    -fcolor-diagnostics|-fno-color-diagnostics) continue;;
    -c|-E|-S|--version|-v|-dumpversion|-dumpmachine) link=0;;
  esac
  set -- "$@" "$a"
done
[ "$link" = 1 ] && set -- "$@" -Wl,--defsym={mark}=0
exec {real} "$@"
"""


def make_fake_ndk(root: Path, api: int = 21, toolchain: bool = True) -> Path:
    """Write the fake NDK under ``root`` for API level ``api`` (``toolchain``: with its CMake toolchain file) and
    return ``root``."""
    bin_dir = root / "toolchains" / "llvm" / "prebuilt" / "linux-x86_64" / "bin"
    bin_dir.mkdir(parents=True)
    for suffix, real in (("clang++", "aarch64-linux-gnu-g++"), ("clang", "aarch64-linux-gnu-gcc")):
        exe = bin_dir / f"aarch64-linux-android{api}-{suffix}"
        exe.write_text(_WRAPPER.format(real=real, mark=MARK))
        exe.chmod(0o755)
    if toolchain:
        (root / "build" / "cmake").mkdir(parents=True)
        (root / "build" / "cmake" / "android.toolchain.cmake").write_text(_TOOLCHAIN)
    (root / "source.properties").write_text(f"Pkg.Desc = Android NDK\nPkg.Revision = {REVISION}\n")
    return root
