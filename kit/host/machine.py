"""Facts about this machine: its architecture (in two spellings), whether it runs emulated, its CPU model,
and the conditions of a timing run (usable cores, cpufreq governor and frequency, load).

Two spellings of an architecture are in use, and they are not interchangeable:

* Docker/Debian names (``amd64``, ``arm64``): image platforms and the images' lock file
  (:func:`normalize_arch`, :func:`cpuinfo_arch`);
* ``platform.machine()``/ELF names (``x86_64``, ``aarch64``): shipped machine code (:func:`host_arch`,
  ``kit.host.shipping.ELF_MACHINES``).

:func:`is_emulated` needs neither Docker nor the docker package; workers call it to flag timings taken under
qemu.  This module imports nothing of the kit.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

#: ``platform.machine()`` (and Docker) names -> Docker/Debian names; used by :func:`normalize_arch`
_MACHINE_TO_ARCH = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "armv8l": "arm64",
}
#: names ``platform.machine()`` gives for the same architecture on other systems (the opposite direction of
#: ``_MACHINE_TO_ARCH``: Docker names -> ELF names; ``armv8l``, a 32-bit userland, stays itself)
MACHINE_ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}


# --------------------------------------------------------------------------------------------- architecture


def normalize_arch(machine: str) -> str:
    """``x86_64``/``amd64`` -> ``amd64``, ``aarch64``/``arm64`` -> ``arm64``; anything else lower-cased."""
    return _MACHINE_TO_ARCH.get(machine.lower(), machine.lower())


def host_arch() -> str:
    """This node's architecture in ``kit.host.shipping.ELF_MACHINES``' names (``x86_64``, ``aarch64``, …)."""
    m = platform.machine().lower()
    return MACHINE_ALIASES.get(m, m)


def cpuinfo_arch(text: str) -> str | None:
    """The architecture of the CPU that ``/proc/cpuinfo`` text describes: ``amd64``, ``arm64`` or None.

    x86 kernels list ``vendor_id``/``cpu family``/``flags``; arm64 kernels list ``CPU implementer``/``Features``.
    qemu-user (as of Debian bookworm's 7.2) passes the host's file through unchanged to an emulated process.
    """
    keys = {line.split(":", 1)[0].strip().lower() for line in text.splitlines() if ":" in line}
    if "vendor_id" in keys and "cpu family" in keys:
        return "amd64"
    if "cpu implementer" in keys and "cpu architecture" in keys:
        return "arm64"
    return None


# --------------------------------------------------------------------------------------------- emulation


def is_emulated(machine: str | None = None, cpuinfo: str | None = None) -> bool:
    """True when this process runs under instruction emulation (qemu-user, e.g. an arm64 image on x86).

    Compares the architecture the process is built for (``platform.machine()``) with the CPU the kernel
    reports in ``/proc/cpuinfo``; both can be given for testing.  Returns False when ``/proc/cpuinfo`` is
    unreadable or names no known architecture (no evidence of emulation).  Timings taken when this is True
    must not be scored as speedups.
    """
    mach = normalize_arch(machine if machine is not None else platform.machine())
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return False
    cpu = cpuinfo_arch(cpuinfo)
    return cpu is not None and cpu != mach


# --------------------------------------------------------------------------------------------- CPU


def cpu_model() -> str:
    """This node's CPU model name from /proc/cpuinfo ("unknown" if absent, e.g. on many aarch64 kernels)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


# ---------------------------------------------------------------------------------------- timing conditions


def usable_cores() -> list[int]:
    """The CPU cores this process may run on (its affinity mask), sorted."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return list(range(os.cpu_count() or 1))


def timing_cores(threads: int, configured: list[int] | tuple[int, ...] = ()) -> tuple[int, ...]:
    """The cores a timing run is pinned to: ``configured`` when given, else the last ``threads`` usable cores
    (the first ones take the system's interrupts and housekeeping more often).

    Raises:
        ValueError: a configured core is not usable here, or fewer than ``threads`` cores are."""
    usable = usable_cores()
    if configured:
        missing = sorted(set(configured) - set(usable))
        if missing:
            raise ValueError(f"timing.cores {list(configured)}: cores {missing} are not usable here (usable: {usable})")
        return tuple(sorted(configured))
    if len(usable) < threads:
        raise ValueError(f"timing.threads = {threads}: only {len(usable)} usable core(s) here ({usable})")
    return tuple(usable[-threads:])


#: where the kernel describes the CPUs (``cpu<N>/cpufreq/...``)
CPU_SYSFS = Path("/sys/devices/system/cpu")


def _cpufreq(core: int, name: str) -> str | None:
    try:
        return (CPU_SYSFS / f"cpu{core}" / "cpufreq" / name).read_text().strip()
    except OSError:
        return None


def cpu_governor(cores: tuple[int, ...] | list[int]) -> str:
    """The cpufreq scaling governor of ``cores`` ("performance", "schedutil", ...; several joined by ``,``;
    "" where the kernel exposes none, e.g. in most VMs)."""
    names = sorted({g for c in cores if (g := _cpufreq(c, "scaling_governor"))})
    return ",".join(names)


def cpu_freq_mhz(cores: tuple[int, ...] | list[int]) -> float | None:
    """The mean current frequency of ``cores`` in MHz (``scaling_cur_freq``; None where unreadable)."""
    khz = [int(v) for c in cores if (v := _cpufreq(c, "scaling_cur_freq")) and v.isdigit()]
    return sum(khz) / len(khz) / 1000.0 if khz else None


def load_1m() -> float | None:
    """The host's 1-minute load average (``/proc/loadavg``; None where unreadable)."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def allowed_cores(pid: int) -> tuple[int, ...] | None:
    """The cores process ``pid`` may run on (``Cpus_allowed_list`` of ``/proc/<pid>/status``; None where
    unreadable, e.g. the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                return tuple(_parse_list(line.split(":", 1)[1].strip()))
    except OSError:
        return None
    return None


def _parse_list(text: str) -> list[int]:
    """``0-2,5`` → ``[0, 1, 2, 5]`` (the kernel's cpu list format)."""
    out: list[int] = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


# --------------------------------------------------------------------------------------------- fingerprint

#: the keys of :func:`fingerprint` that describe the hardware: timings taken where one of them differs are not
#: comparable (``kernel`` and ``governor`` are said beside them, but do not make the hardware another)
HARDWARE_KEYS: tuple[str, ...] = ("cpu_model", "arch", "cpus")


def fingerprint() -> dict[str, object]:
    """This node as a reviewer compares it with another: ``cpu_model`` (str), ``arch`` (``platform.machine()``),
    ``cpus`` (int, logical CPUs of the machine), ``usable_cores`` (int, of this process's affinity mask),
    ``kernel`` (``platform.release()``) and ``governor`` (cpufreq governor of the usable cores, "" where
    unreadable: :func:`cpu_governor`)."""
    usable = usable_cores()
    return {
        "cpu_model": cpu_model(),
        "arch": platform.machine(),
        "cpus": os.cpu_count() or len(usable),
        "usable_cores": len(usable),
        "kernel": platform.release(),
        "governor": cpu_governor(usable),
    }
