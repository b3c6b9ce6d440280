"""The target a run builds for and where it is timed: architecture, build mode, timing device.

A target is the architecture of the machine code a job produces (``x86_64``, the default, or ``aarch64``, a
phone's), in ``platform.machine()``/ELF names (:mod:`kit.host.machine`).  Its **build mode** follows from the
host: ``native`` when the host has that architecture, ``cross`` otherwise (only x86_64 → aarch64 is
supported: Debian's ``g++-aarch64-linux-gnu`` and the kit's CMake toolchain file, or an Android NDK's toolchain,
:class:`Ndk`; :mod:`kit.mnn.toolchain`).
A cross build's runtime is linked statically (the same binary runs on a phone) and, on this host, runs under
user-mode emulation (Debian's ``qemu-aarch64-static``, called explicitly: no binfmt registration); its
verification counts, its timings are recorded and never scored (:mod:`kit.results.rules`).

The **timing device** says where timing runs: ``host`` (this node, natively), ``qemu`` (this node, emulated),
``ray:<label>`` (Ray nodes carrying a custom resource), ``adb:<serial>`` (an Android device over adb,
:mod:`kit.devices`; verification still runs here, under qemu for a cross build).  This module imports nothing of the kit but
:mod:`kit.host.machine`.

Every fact here is **per node**: a :class:`Target` is made on the node that uses it (``host_arch`` is that node's
architecture, injectable for tests), so the same config builds natively on an aarch64 build node and
cross-builds on an x86_64 one, and a timing node (``ray:<label>``) runs what it receives natively when it is an
aarch64 machine, or under the emulator when it is an x86_64 node that stands in for one (loopback tests: its
timings are emulated, never scored).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kit.host import machine as hostinfo

#: architectures a config may target, in ``platform.machine()`` names
ARCHES = ("x86_64", "aarch64")
#: the default target (today's behaviour: the x86_64 host)
DEFAULT_ARCH = "x86_64"
#: (host, target) pairs the kit can cross-build
CROSS_PAIRS = frozenset({("x86_64", "aarch64")})


#: the Android ABI and API level of an NDK build by default: those of MNN 3.2.2's own 64-bit Android build
#: script (``project/android/build_64.sh``: ``ANDROID_ABI=arm64-v8a``, ``android-21``, ``c++_static``)
NDK_ABI = "arm64-v8a"
NDK_API = 21
#: the NDK's C++ runtime the kit links (MNN's script's; statically, see :attr:`Target.static`)
NDK_STL = "c++_static"


@dataclass(frozen=True)
class Ndk:
    """An Android NDK a cross build uses instead of Debian's cross compilers (the paper's set-up): ``root``, the
    NDK's folder (absolute); ``api``: the Android API level the binaries need at least; ``abi``: the Android ABI
    (``arm64-v8a``, the only one of ``aarch64``).  Paths follow the NDK's own layout (r19 and later)."""

    root: str
    api: int = NDK_API
    abi: str = NDK_ABI

    @property
    def toolchain_file(self) -> Path:
        """The NDK's CMake toolchain file, ``<root>/build/cmake/android.toolchain.cmake``."""
        return Path(self.root) / "build" / "cmake" / "android.toolchain.cmake"

    @property
    def clangxx(self) -> Path:
        """The NDK's C++ compiler driver for ``api``: ``<root>/toolchains/llvm/prebuilt/linux-x86_64/bin/
        aarch64-linux-android<api>-clang++`` (the kit's runner is compiled with it)."""
        return (Path(self.root) / "toolchains" / "llvm" / "prebuilt" / "linux-x86_64" / "bin"
                / f"aarch64-linux-android{self.api}-clang++")

    def revision(self) -> str:
        """The NDK's ``Pkg.Revision`` from ``<root>/source.properties`` (every NDK release has one), or
        ``unknown``: part of the config digest and of the native baseline's key."""
        try:
            text = (Path(self.root) / "source.properties").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "unknown"
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "Pkg.Revision":
                return value.strip()
        return "unknown"

    def problem(self) -> str | None:
        """What is missing for a build with this NDK (None: nothing): the folder, its toolchain file or the
        compiler driver of ``api``."""
        if not Path(self.root).is_dir():
            return f"{self.root}: no such folder (give the NDK's root, the folder holding build/ and toolchains/)"
        for what in (self.toolchain_file, self.clangxx):
            if not what.is_file():
                return f"{what} not found: {self.root} is not an Android NDK (r19 or later) for API level {self.api}"
        return None

    def describe(self) -> dict[str, object]:
        """The NDK's identity in digests and keys: revision, API level, ABI (not its path)."""
        return {"revision": self.revision(), "api": self.api, "abi": self.abi}


class TargetError(Exception):
    """The target cannot be built or run here (a missing cross compiler or emulator, an unsupported host):
    the message names ``target.arch`` and what to install."""


@dataclass(frozen=True)
class Target:
    """``arch``: the architecture jobs are built for; ``host_arch``: this node's; ``fp16``: ARMv8.2 half-precision
    arithmetic compiled in (aarch64 only; MNN's ``MNN_ARM82``); ``timing_resource``: the Ray resource of the
    timing nodes (None: this node times); ``device``: the serial of the adb device that times (None: none);
    ``ndk``: the Android NDK a cross build uses (None: Debian's cross compilers)."""

    arch: str = DEFAULT_ARCH
    host_arch: str = DEFAULT_ARCH
    fp16: bool = False
    timing_resource: str | None = None
    device: str | None = None
    ndk: Ndk | None = None

    @property
    def cross(self) -> bool:
        """Built on this host for another architecture."""
        return self.arch != self.host_arch

    @property
    def build_mode(self) -> str:
        """``native``, ``cross`` (Debian's cross compilers) or ``cross-ndk`` (an Android NDK's)."""
        if not self.cross:
            return "native"
        return "cross-ndk" if self.ndk is not None else "cross"

    @property
    def emulated(self) -> bool:
        """This node runs the target's binaries under user-mode emulation: a cross build is verified here under
        the emulator, and so is it timed wherever this node times it (here, or as a ``ray:<label>`` timing node
        of another architecture); an adb device runs them natively (:mod:`kit.devices`)."""
        return self.cross

    @property
    def timing_device(self) -> str:
        """``host``, ``qemu``, ``ray:<label>`` or ``adb:<serial>`` (module docstring)."""
        if self.device is not None:
            return f"adb:{self.device}"
        if self.timing_resource is not None:
            return f"ray:{self.timing_resource}"
        return "qemu" if self.cross else "host"

    @property
    def static(self) -> bool:
        """The runtime (engine libraries and runner) is linked into one static executable per side: every cross
        build, so that the binary needs no library of the build host's sysroot.  With an Android NDK too
        (``-static`` with the NDK's ``libc.a`` and ``c++_static``), although an NDK could link Bionic
        dynamically: the kit verifies the very binary a phone runs under qemu on the build host, which has no
        Android dynamic linker (``/system/bin/linker64``) to load a dynamic one."""
        return self.cross

    def check(self) -> None:
        """Refuse a pair of host and target the kit cannot build.

        Raises:
            TargetError: names ``target.arch`` and the supported pairs."""
        if self.cross and (self.host_arch, self.arch) not in CROSS_PAIRS:
            pairs = ", ".join(f"{h} -> {t}" for h, t in sorted(CROSS_PAIRS))
            raise TargetError(f"target.arch = {self.arch!r}: this host is {self.host_arch} and the kit cross-builds "
                              f"only {pairs}")

    def check_runs_here(self) -> None:
        """Refuse a target whose binaries this node cannot run (a timing node): natively when it has the
        target's architecture, else only under the emulator of a pair the kit cross-builds (an x86_64 node
        standing in for an aarch64 one).

        Raises:
            TargetError: names ``target.arch`` and this node's architecture."""
        if self.cross and (self.host_arch, self.arch) not in CROSS_PAIRS:
            raise TargetError(f"target.arch = {self.arch!r}: this timing node is {self.host_arch} and can run "
                              f"neither {self.arch} binaries natively nor under an emulator the kit knows")

    def describe(self) -> dict[str, str]:
        """The record fields of this target: ``target_arch``, ``build_mode``, ``timing_device``."""
        return {"target_arch": self.arch, "build_mode": self.build_mode, "timing_device": self.timing_device}


def make_target(arch: str = DEFAULT_ARCH, fp16: bool = False, timing_resource: str | None = None,
                host_arch: str | None = None, device: str | None = None, ndk: Ndk | None = None) -> Target:
    """The :class:`Target` for ``arch`` on this node (``host_arch``: :func:`kit.host.machine.host_arch` unless given;
    ``device``: the serial of the adb device that times; ``ndk``: the Android NDK of a cross build)."""
    return Target(arch=arch, host_arch=host_arch or hostinfo.host_arch(), fp16=fp16, timing_resource=timing_resource,
                  device=device, ndk=ndk)
