"""Cross toolchains and emulators: how a cross build is configured, what it builds, how its binaries run here.

Facts (Debian bookworm, MNN 3.2.2; measured on the 2-core x86_64 dev VM):

* ``g++-aarch64-linux-gnu`` 12.2 cross-compiles with the kit's toolchain file
  (``toolchains/aarch64-linux-gnu.cmake``: the cross compilers, headers and libraries from the sysroot
  ``/usr/aarch64-linux-gnu``, programs from the host).  MNN enables NEON by itself for an aarch64 processor
  (``MNN_USE_NEON``); ARMv8.2 fp16 (``MNN_ARM82``, on by MNN's default) only with ``target.fp16``.
* The runtime is static (``MNN_BUILD_SHARED_LIBS=OFF``, ``MNN_SEP_BUILD=OFF``: one ``libMNN.a`` with the
  Express API in it) and the runner links it whole (``--whole-archive``: an undefined symbol, e.g. a dropped
  registration function, fails that link, as an executable's link fails for a shared build) into one
  ``-static`` executable per side, which needs nothing of the host's sysroot (it runs on a phone as is).
* The converter always runs on the build host: a cross workspace builds no converter (``MNN_BUILD_CONVERTER=OFF``);
  the host's native build converts, and a converter task's candidate is built in a host workspace.
* Measured for MNN 3.2.2 (``ninja MNN``, 380 steps, ARMv8.2 off): 25 min 14 s cold on the 2-core VM under a
  load of 6-8 (4 min 48 s unloaded with ARMv8.2 on, 407 steps); a new workspace with a warm ccache 3.4 s.
  The runner compiles in 6.3 s once per workspace and links in 0.6 s per build.  The sample set's 39 jobs, warm
  reruns with 2 trials and 2 x 4 timed iterations: 101.6 s cross-built and emulated against 156.5 s on x86
  (median ok job 4.22 s against 4.25 s: a cross build builds the library alone, 0.88 s against 2.87 s for
  x86's 23 executables then, while verification and timing under qemu take 3x as long, 1.29 s and 1.44 s).
* ``qemu-aarch64-static`` (``qemu-user-static`` 7.2) runs the aarch64 binaries when called explicitly,
  ``qemu-aarch64-static -L /usr/aarch64-linux-gnu BINARY ...`` (no binfmt registration); an emulated process
  has one thread more than its program starts (qemu's RCU thread: ``Threads: 2`` in ``/proc/self/status`` for
  a single-threaded static program), which the runner's thread check allows (``--extra-threads``).
* With an Android NDK (``target.ndk``, :class:`kit.host.target.Ndk`) the cross build uses the NDK's
  ``build/cmake/android.toolchain.cmake`` with ``ANDROID_ABI``, ``ANDROID_PLATFORM`` and ``ANDROID_STL`` (MNN's
  ``project/android/build_64.sh``: arm64-v8a, android-21, c++_static; for MNN also its ``MNN_USE_LOGCAT=false``,
  so the runtime's messages reach the runner's stderr, and ``MNN_BUILD_FOR_ANDROID_COMMAND=true``, so its
  libraries stay in the build folder), and the kit's runner is compiled with the NDK's
  ``aarch64-linux-android<API>-clang++``, linked ``-static`` as without one (:attr:`kit.host.target.Target.static`).
  No real NDK was run here: the tests use an NDK-shaped folder whose compiler wraps Debian's cross g++.
"""

from __future__ import annotations

from pathlib import Path

from kit.host import proc
from kit.host.target import NDK_STL, Target, TargetError

#: the kit's CMake toolchain file per target architecture
TOOLCHAIN_FILES = {"aarch64": Path(__file__).with_name("toolchains") / "aarch64-linux-gnu.cmake"}
#: the cross compilers the toolchain files name (C++ first), and the sysroot they use
CROSS_COMPILERS = {"aarch64": ("aarch64-linux-gnu-g++", "aarch64-linux-gnu-gcc")}
SYSROOTS = {"aarch64": "/usr/aarch64-linux-gnu"}
#: the user-mode emulator of each architecture (Debian's qemu-user-static)
EMULATORS = {"aarch64": "qemu-aarch64-static"}
#: the Debian packages that provide the above
DEBIAN_PACKAGES = {"aarch64": ("g++-aarch64-linux-gnu", "qemu-user-static")}
#: threads the emulator adds to an emulated process (module docstring)
EMULATOR_THREADS = 1

#: CMake arguments of a cross build, per engine (besides the toolchain file)
_CROSS_ARGS = {
    "mnn": ["-DMNN_BUILD_CONVERTER=OFF", "-DMNN_BUILD_TOOLS=OFF", "-DMNN_BUILD_SHARED_LIBS=OFF", "-DMNN_SEP_BUILD=OFF"],
    "fixture": ["-DMKB_STATIC=ON"],
}


def cross_cmake_args(engine: str, target: Target) -> list[str]:
    """The CMake arguments that configure ``engine`` for ``target`` (a cross target): the toolchain file and
    the engine's static, converter-less build; MNN's ARMv8.2 fp16 kernels on only with ``target.fp16``."""
    args = [f"-DCMAKE_TOOLCHAIN_FILE={toolchain_file(target)}", *_CROSS_ARGS[engine]]
    if target.ndk is not None:
        args += [f"-DANDROID_ABI={target.ndk.abi}", f"-DANDROID_PLATFORM=android-{target.ndk.api}",
                 f"-DANDROID_STL={NDK_STL}"]
        if engine == "mnn":
            args += ["-DMNN_USE_LOGCAT=OFF", "-DMNN_BUILD_FOR_ANDROID_COMMAND=ON"]
    if engine == "mnn":
        args.append(f"-DMNN_ARM82={'ON' if target.fp16 else 'OFF'}")
    return args


def toolchain_file(target: Target) -> Path:
    """The CMake toolchain file of ``target``'s cross build: the NDK's with ``target.ndk``, else the kit's."""
    return target.ndk.toolchain_file if target.ndk is not None else TOOLCHAIN_FILES[target.arch]


def build_reads(target: Target) -> list[Path]:
    """What a confined cross build reads besides the workspace: the kit's toolchain file, or the whole NDK
    (its toolchain file includes its siblings; its compilers, headers and libraries); nothing natively."""
    if not target.cross:
        return []
    return [Path(target.ndk.root)] if target.ndk is not None else [TOOLCHAIN_FILES[target.arch]]


def cxx(target: Target) -> str:
    """The C++ compiler of ``target``'s builds (``c++`` natively; with an NDK its clang++ for the API level)."""
    if not target.cross:
        return "c++"
    return str(target.ndk.clangxx) if target.ndk is not None else CROSS_COMPILERS[target.arch][0]


def emulator(target: Target) -> tuple[str, ...]:
    """The command prefix that runs ``target``'s binaries on this node: ``()`` natively, else the emulator
    with the sysroot, ``("/usr/bin/qemu-aarch64-static", "-L", "/usr/aarch64-linux-gnu")``.

    Raises:
        TargetError: the emulator is not installed (the message names the Debian package)."""
    if not target.emulated:
        return ()
    exe = proc.which(EMULATORS[target.arch])
    if exe is None:
        raise TargetError(_missing(target, EMULATORS[target.arch]))
    return (str(exe), "-L", SYSROOTS[target.arch])


def check_tools(target: Target) -> None:
    """Refuse a cross target whose compilers, sysroot or emulator are missing here.

    Raises:
        TargetError: names ``target.arch``, what is missing and the Debian packages to install."""
    target.check()
    if not target.cross:
        return
    if target.ndk is not None:
        if (problem := target.ndk.problem()) is not None:
            raise TargetError(f"target.ndk: {problem}")
        emulator(target)
        return
    for exe in CROSS_COMPILERS[target.arch]:
        if proc.which(exe) is None:
            raise TargetError(_missing(target, exe))
    if not Path(SYSROOTS[target.arch]).is_dir():
        raise TargetError(_missing(target, SYSROOTS[target.arch]))
    emulator(target)


def _missing(target: Target, what: str) -> str:
    pkgs = " ".join(DEBIAN_PACKAGES[target.arch])
    return (f"target.arch = {target.arch!r}: {what} not found on this {target.host_arch} host "
            f"(Debian: apt-get install {pkgs})")
