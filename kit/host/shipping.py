"""Machine code that travels between nodes: ELF facts of a file and bundles of files (Ray's object store carries
them as plain bytes).

When build and timing run on different nodes (``dispatch.build_resource``), a build worker packs what the
timing node needs — the candidate's shared libraries, the candidate's converted model and the native
model — and a timing worker unpacks them into its scratch directory.  Timing workers receive the native
baseline (its libraries and the runner) the same way once, at start, from a build worker, so timing nodes
need neither a compiler nor the MNN source, and both sides are the same build of the same tree.

The architecture of shipped machine code is read from the ELF header (``e_machine``: ``EM_X86_64`` = 62,
``EM_AARCH64`` = 183), never assumed: a timing node checks every executable and library it receives, file by
file, against the architecture it runs (:meth:`Bundle.check_machine`: its own, or the target it emulates), before
writing any of them.  A cross target's runtime is one static runner per side (``bin/mkb_runner``, no shared
library: :func:`elf_static` tells it from a runner that loads ``lib/``).  Only the libraries the runner
loads are shipped (the ``DT_NEEDED`` closure of the runner within the library directory: for MNN
``libMNN.so`` and ``libMNN_Express.so``, ~4.4 MB on x86_64, not the converter's 9.6 MB of dependencies).
ELF files are read with pyelftools.
"""

from __future__ import annotations

import io
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kit.host.machine import host_arch

if TYPE_CHECKING:
    from elftools.elf.elffile import ELFFile

#: ELF ``e_machine`` names (pyelftools' spelling of the System V ABI values) → ``platform.machine()`` names
ELF_MACHINES = {"EM_386": "i686", "EM_ARM": "armv7l", "EM_X86_64": "x86_64", "EM_AARCH64": "aarch64",
                "EM_RISCV": "riscv64"}


class ArtefactError(Exception):
    """A bundle cannot be used here: not ELF, another architecture, or an unsafe path (message names the file)."""


def _elf(data: bytes, name: str) -> ELFFile:
    # imported here: only a run that ships artefacts reads them, and pyelftools costs a check's start-up ~0.2 s
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    if data[:4] != b"\x7fELF":
        raise ArtefactError(f"{name}: not an ELF file")
    try:
        return ELFFile(io.BytesIO(data))
    except ELFError as exc:
        raise ArtefactError(f"{name}: unreadable ELF header: {exc}") from exc


def elf_arch(data: bytes, name: str = "file") -> str:
    """The architecture of an ELF image (its header's ``e_machine``) in ``platform.machine()`` names;
    other machines as pyelftools names them (e.g. ``EM_PPC64``), or ``elf-machine-0x…``.

    Raises:
        ArtefactError: ``data`` is not an ELF image (``name`` is named in the message).
    """
    machine = _elf(data, name).header["e_machine"]
    if isinstance(machine, int):  # a value pyelftools has no name for
        return f"elf-machine-{machine:#x}"
    return ELF_MACHINES.get(machine, machine)


def elf_machine(data: bytes, name: str = "file") -> str:
    """The ``e_machine`` of an ELF image as the System V ABI names it (``EM_AARCH64``), or its number
    (``0x1234``) when pyelftools has no name for it.

    Raises:
        ArtefactError: ``data`` is not an ELF image."""
    machine = _elf(data, name).header["e_machine"]
    return f"{machine:#x}" if isinstance(machine, int) else machine


def elf_static(data: bytes, name: str = "file") -> bool:
    """Whether an ELF executable is linked statically (no ``PT_INTERP`` segment: no dynamic loader, no library
    loaded): a cross target's runner, which carries its side's engine.

    Raises:
        ArtefactError: ``data`` is not an ELF image."""
    return not any(seg["p_type"] == "PT_INTERP" for seg in _elf(data, name).iter_segments())


#: ``platform.machine()`` names → ELF ``e_machine`` names (the inverse of :data:`ELF_MACHINES`)
ARCH_MACHINES = {arch: em for em, arch in ELF_MACHINES.items()}


def elf_needed(path: Path) -> list[str]:
    """The ``DT_NEEDED`` entries (library names) of an ELF file's dynamic section, in order.

    Raises:
        ArtefactError: ``path`` is not an ELF file.  OSError: it cannot be read.
    """
    from elftools.elf.dynamic import DynamicSection

    elf = _elf(Path(path).read_bytes(), str(path))
    out: list[str] = []
    for section in elf.iter_sections():
        if isinstance(section, DynamicSection):
            out += [t.needed for t in section.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
    return out


def runtime_libs(exe: Path, lib_dir: Path, prefix: str = "lib/") -> dict[str, Path]:
    """``{prefix + name: path}`` for the libraries of ``lib_dir`` that ``exe`` loads, directly or through
    each other (the ``DT_NEEDED`` closure restricted to ``lib_dir``; system libraries are not shipped).

    Raises:
        ArtefactError: ``exe`` or a library is not an ELF file.
    """
    found: dict[str, Path] = {}
    todo = elf_needed(exe)
    while todo:
        name = todo.pop()
        path = lib_dir / name
        if name in found or not path.is_file():
            continue
        found[name] = path
        todo += elf_needed(path)
    return {prefix + n: p for n, p in sorted(found.items())}


@dataclass(frozen=True)
class Bundle:
    """Files by relative POSIX path → bytes, plus the architecture of the ELF files among them.

    ``arch`` is "" when the bundle holds no ELF file (e.g. only models).
    """

    files: dict[str, bytes]
    arch: str = ""

    @property
    def size_bytes(self) -> int:
        return sum(len(b) for b in self.files.values())

    def write(self, dest: Path) -> Path:
        """Write every file under ``dest`` (created; executables get mode 0755) and return ``dest``.

        Raises:
            ArtefactError: a path is absolute or leaves ``dest``.
        """
        dest.mkdir(parents=True, exist_ok=True)
        root = dest.resolve()
        for rel, data in self.files.items():
            target = (dest / rel).resolve()
            if Path(rel).is_absolute() or root not in target.parents:
                raise ArtefactError(f"bundle path {rel!r} leaves the destination directory")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            os.chmod(target, 0o755 if data[:4] == b"\x7fELF" else 0o644)
        return dest

    def check_machine(self, arch: str, what: str, how: str = "natively") -> None:
        """Refuse the bundle unless every executable and library in it is machine code for ``arch`` (the
        architecture this node runs ``how``: ``natively``, or ``under qemu-aarch64-static``).  Each file's own
        ELF header is read (``arch``, which the sender set, is not trusted); a file is machine code when it is
        ELF, lies under ``bin/`` or is named as a shared library (``*.so``, ``*.so.N``): a non-ELF one of the
        last two is refused (nothing but ELF may be run or loaded).

        Raises:
            ArtefactError: names ``what``, the file, its ELF machine and the one expected."""
        want = ARCH_MACHINES.get(arch, arch)
        for rel, data in sorted(self.files.items()):
            is_elf = data[:4] == b"\x7fELF"
            if not is_elf and not (rel.startswith("bin/") or ".so" in Path(rel).suffixes):
                continue  # a model, a text file: no machine code
            if not is_elf:
                raise ArtefactError(f"{what}: {rel} is not an ELF file; this node ({platform.node()}) runs only "
                                    f"{arch} ELF executables and libraries ({want})")
            got = elf_machine(data, rel)
            if got != want:
                got_arch = ELF_MACHINES.get(got, got)
                raise ArtefactError(f"{what}: {rel} was built for {got_arch} (ELF machine {got}), this node "
                                    f"({platform.node()}) runs {arch} {how} (ELF machine {want})")

    def check_runs_here(self, what: str) -> None:
        """:meth:`check_machine` against this node's own architecture, natively."""
        self.check_machine(host_arch(), what)


def pack(sources: dict[str, Path]) -> Bundle:
    """A :class:`Bundle` of files: ``{relative path in the bundle: file on disk}`` (symlinks followed).

    Raises:
        ArtefactError: the ELF files among them are of different architectures.
        OSError: a file cannot be read.
    """
    files: dict[str, bytes] = {}
    archs: set[str] = set()
    for rel, path in sorted(sources.items()):
        data = Path(path).read_bytes()
        files[rel] = data
        if data[:4] == b"\x7fELF":
            archs.add(elf_arch(data, str(path)))
    if len(archs) > 1:
        raise ArtefactError(f"bundle mixes architectures {sorted(archs)}: {sorted(sources)}")
    return Bundle(files, archs.pop() if archs else "")
