"""The fast ELF symbol reader (kit.stages.elfsyms) reads the same global symbols as pyelftools, on a library the
test compiles and on the system's libc, and refuses what is not an ELF file or is cut off."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from kit.stages import screen
from kit.stages.elfsyms import ElfSymbolError, global_symbols

NEEDS_GXX = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")

CODE = """
#include <cstdio>
#include <cstring>
extern "C" int mnn_kernel(int x) { return x + 1; }
extern "C" void* mnn_copy(void* d, const void* s, unsigned long n) { return memcpy(d, s, n); }
static int hidden_helper(int x) { return x * 3; }
int mnn_cpp_symbol(int x) { std::printf("%d", hidden_helper(x)); return x; }
"""


def _pyelftools(path: Path, table: str) -> tuple[frozenset[str], frozenset[str]]:
    """The reference reading: what kit.stages.screen read with pyelftools before kit.stages.elfsyms."""
    defined, undefined = set(), set()
    with open(path, "rb") as f:
        for section in ELFFile(f).iter_sections():
            if not isinstance(section, SymbolTableSection) or section.name != table:
                continue
            for sym in section.iter_symbols():
                if not sym.name or sym["st_info"]["bind"] == "STB_LOCAL":
                    continue
                (undefined if sym["st_shndx"] == "SHN_UNDEF" else defined).add(sym.name.split("@")[0])
    return frozenset(defined), frozenset(undefined)


def _compiled(tmp: Path, *flags: str) -> Path:
    src = tmp / "lib.cpp"
    src.write_text(CODE)
    out = tmp / ("lib.o" if "-c" in flags else "lib.so")
    subprocess.run(["g++", "-fPIC", "-O1", *flags, str(src), "-o", str(out)], check=True, capture_output=True)
    return out


@NEEDS_GXX
@pytest.mark.parametrize("flags,table", [(("-shared",), ".dynsym"), (("-shared",), ".symtab"), (("-c",), ".symtab"),
                                         (("-shared", "-m32"), ".dynsym")])
def test_the_symbols_of_a_compiled_library_are_those_pyelftools_reads(tmp_path, flags, table):
    try:
        lib = _compiled(tmp_path, *flags)
    except subprocess.CalledProcessError:
        if "-m32" in flags:
            pytest.skip("no 32-bit multilib here")
        raise
    ours = global_symbols(lib, table)
    assert ours == _pyelftools(lib, table)
    defined, undefined = ours
    assert "mnn_kernel" in defined and "hidden_helper" not in defined | undefined
    assert "memcpy" in undefined and "printf" in undefined


def test_libc_reads_as_pyelftools_reads_it():
    libc = next((Path(p) for p in screen.LIBC_PATHS if Path(p).is_file()), None)
    if libc is None:
        pytest.skip("no libc at the known paths")
    ours = global_symbols(libc)
    assert ours == _pyelftools(libc, ".dynsym")
    assert {"memcpy", "clock_gettime", "fork"} <= ours[0]


def test_a_file_that_is_not_elf_or_is_cut_off_is_refused(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a library")
    empty = tmp_path / "empty.so"
    empty.write_bytes(b"")
    for path in (text, empty):
        with pytest.raises(ElfSymbolError, match="not an ELF file"):
            global_symbols(path)
    with pytest.raises(ValueError, match="notes.txt: not an ELF file"):
        screen.read_symbols(text)
    libc = next((Path(p) for p in screen.LIBC_PATHS if Path(p).is_file()), None)
    if libc is not None:  # the header survives, the section headers (at the file's end) do not
        cut = tmp_path / "cut.so"
        cut.write_bytes(libc.read_bytes()[:4096])
        with pytest.raises(ElfSymbolError, match="outside"):
            global_symbols(cut)
