"""Facts about this machine: its architecture (in two spellings), whether it runs emulated, its CPU model.

Two spellings of an architecture are in use, and they are not interchangeable:

* Docker/Debian names (``amd64``, ``arm64``): image platforms and the images' lock file
  (:func:`normalize_arch`, :func:`cpuinfo_arch`);
* ``platform.machine()``/ELF names (``x86_64``, ``aarch64``): shipped machine code (:func:`host_arch`,
  ``kit.artefacts.ELF_MACHINES``).

:func:`is_emulated` needs neither Docker nor the docker package; workers call it to flag timings taken under
qemu.  This module imports nothing of the kit.
"""

from __future__ import annotations

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
    """This node's architecture in ``kit.artefacts.ELF_MACHINES``' names (``x86_64``, ``aarch64``, …)."""
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
