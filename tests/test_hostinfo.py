"""kit.hostinfo: the architecture a process is built for, the CPU it runs on, and the emulation check."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from kit import hostinfo

_X86_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 85
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep
"""
_ARM_CPUINFO = """processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x3
CPU part\t: 0xd0c
"""


def test_cpuinfo_arch_tells_x86_from_arm() -> None:
    assert hostinfo.cpuinfo_arch(_X86_CPUINFO) == "amd64"
    assert hostinfo.cpuinfo_arch(_ARM_CPUINFO) == "arm64"
    assert hostinfo.cpuinfo_arch("processor\t: 0\n") is None


def test_is_emulated_compares_process_arch_with_cpu() -> None:
    # an aarch64 process that sees an x86 CPU: qemu-user on an x86 host
    assert hostinfo.is_emulated("aarch64", _X86_CPUINFO) is True
    assert hostinfo.is_emulated("x86_64", _ARM_CPUINFO) is True
    assert hostinfo.is_emulated("aarch64", _ARM_CPUINFO) is False
    assert hostinfo.is_emulated("x86_64", _X86_CPUINFO) is False
    assert hostinfo.is_emulated("aarch64", "no architecture here\n") is False


def test_this_host_is_not_emulated() -> None:
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.is_file() or hostinfo.cpuinfo_arch(cpuinfo.read_text()) is None:
        pytest.skip("no /proc/cpuinfo naming an x86 or arm64 CPU")
    assert hostinfo.cpuinfo_arch(cpuinfo.read_text()) == hostinfo.normalize_arch(platform.machine())
    assert hostinfo.is_emulated() is False
