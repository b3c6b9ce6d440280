"""kit.host.machine: the architecture a process is built for, the CPU it runs on, and the emulation check."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from kit.host import machine as hostinfo

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


# -- the conditions of a timing run --------------------------------------------------------------------------
def test_timing_cores_are_the_last_usable_ones_or_the_configured_ones():
    usable = hostinfo.usable_cores()
    assert hostinfo.timing_cores(1) == (usable[-1],)
    assert hostinfo.timing_cores(1, [usable[0]]) == (usable[0],)
    with pytest.raises(ValueError, match="not usable here"):
        hostinfo.timing_cores(1, [max(usable) + 1])
    with pytest.raises(ValueError, match="usable core"):
        hostinfo.timing_cores(len(usable) + 1)


def test_cpu_list_parsing_and_a_process_allowed_cores():
    import os

    assert hostinfo._parse_list("0-2,5,7-8") == [0, 1, 2, 5, 7, 8]
    assert hostinfo.allowed_cores(os.getpid()) == tuple(hostinfo.usable_cores())
    assert hostinfo.allowed_cores(2**22 + 12345) is None  # no such process


def test_governor_and_frequency_from_sysfs(tmp_path, monkeypatch):
    for core, (gov, khz) in {0: ("performance", "2400000"), 1: ("powersave", "800000")}.items():
        d = tmp_path / f"cpu{core}" / "cpufreq"
        d.mkdir(parents=True)
        (d / "scaling_governor").write_text(gov + "\n")
        (d / "scaling_cur_freq").write_text(khz + "\n")
    monkeypatch.setattr(hostinfo, "CPU_SYSFS", tmp_path)
    assert hostinfo.cpu_governor([0]) == "performance" and hostinfo.cpu_governor([0, 1]) == "performance,powersave"
    assert hostinfo.cpu_freq_mhz([0]) == 2400.0 and hostinfo.cpu_freq_mhz([0, 1]) == 1600.0
    assert hostinfo.cpu_governor([5]) == "" and hostinfo.cpu_freq_mhz([5]) is None  # not exposed (most VMs)


def test_load_average_is_read():
    load = hostinfo.load_1m()
    assert load is None or load >= 0.0
    if Path("/proc/loadavg").is_file():
        assert load is not None


def test_configured_timing_cores_are_sorted_so_either_order_is_the_same_pinning():
    usable = hostinfo.usable_cores()
    if len(usable) < 2:
        pytest.skip("needs two usable cores")
    pair = [usable[1], usable[0]]
    assert hostinfo.timing_cores(2, pair) == (usable[0], usable[1]) == hostinfo.timing_cores(2, sorted(pair))
