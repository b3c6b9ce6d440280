"""The global symbols of an ELF file's symbol table, read straight from its bytes.

:func:`kit.stages.screen.read_symbols` needs only which names a library defines and which it imports; a
general ELF parser spends seconds on MNN's ~15 MB ``libMNN.so`` (tens of thousands of symbols, each parsed
field by field).  This reader maps the file and unpacks the section headers and the symbol entries with
:mod:`struct`, as laid out in the System V ABI (gABI, "Object Files": ELF header, section header table,
symbol table; ``Elf32_Sym`` / ``Elf64_Sym``), for 32- and 64-bit files of either byte order.
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

__all__ = ["ElfSymbolError", "global_symbols"]

_SHT_SYMTAB, _SHT_DYNSYM = 2, 11
_SHN_UNDEF = 0
_STB_LOCAL = 0
_SHN_XINDEX = 0xFFFF  # the real section-name table index is in section 0's sh_link


class ElfSymbolError(ValueError):
    """The file is not an ELF file, or its headers or symbol table lie outside it (the message says which)."""


def _layout(data: mmap.mmap | bytes) -> tuple[str, bool]:
    """``(byte-order prefix, is_64)`` from the identification bytes (``EI_CLASS``, ``EI_DATA``)."""
    if len(data) < 16 or data[:4] != b"\x7fELF":
        raise ElfSymbolError("not an ELF file (no \\x7fELF magic)")
    klass, order = data[4], data[5]
    if klass not in (1, 2) or order not in (1, 2):
        raise ElfSymbolError(f"unknown ELF class {klass} or data encoding {order}")
    return ("<" if order == 1 else ">"), klass == 2


def _unpack(fmt: str, data: mmap.mmap | bytes, offset: int) -> tuple[int, ...]:
    size = struct.calcsize(fmt)
    if offset < 0 or offset + size > len(data):
        raise ElfSymbolError(f"a header at offset {offset} lies outside the file ({len(data)} bytes)")
    return struct.unpack_from(fmt, data, offset)


Header = tuple[int, int, int, int, int, int]


def _sections(data: mmap.mmap | bytes, end: str, is64: bool) -> tuple[list[Header], int]:
    """Each section header as ``(sh_name, sh_type, sh_offset, sh_size, sh_link, sh_entsize)``, and the index of
    the section that holds the sections' names."""
    if is64:
        shoff, = _unpack(end + "Q", data, 0x28)
        shentsize, shnum, shstrndx = _unpack(end + "HHH", data, 0x3A)
        fmt = end + "IIQQQQIIQQ"
    else:
        shoff, = _unpack(end + "I", data, 0x20)
        shentsize, shnum, shstrndx = _unpack(end + "HHH", data, 0x2E)
        fmt = end + "IIIIIIIIII"
    if shoff == 0:
        return [], 0
    if shentsize < struct.calcsize(fmt):
        raise ElfSymbolError(f"section header entries of {shentsize} bytes are too small")
    first = _unpack(fmt, data, shoff)
    if shnum == 0:  # more than 0xff00 sections: the count is in section 0's sh_size
        shnum = first[5]
    out = []
    for i in range(shnum):
        name, kind, _flags, _addr, offset, size, link, _info, _align, entsize = _unpack(fmt, data, shoff + i * shentsize)
        out.append((name, kind, offset, size, link, entsize))
    if shstrndx == _SHN_XINDEX:
        shstrndx = first[6]
    return out, shstrndx


def _string(data: mmap.mmap | bytes, table: Header, index: int) -> str:
    start = table[2] + index
    if index >= table[3] or start >= len(data):
        raise ElfSymbolError(f"a name at {index} lies outside its string table")
    stop = data.find(b"\0", start, table[2] + table[3])
    return bytes(data[start:stop if stop >= 0 else table[2] + table[3]]).decode("utf-8", "replace")


def _read(data: mmap.mmap | bytes, table: str) -> tuple[set[str], set[str]]:
    end, is64 = _layout(data)
    sections, shstrndx = _sections(data, end, is64)
    defined: set[str] = set()
    undefined: set[str] = set()
    if not sections or shstrndx >= len(sections):
        return defined, undefined
    names = sections[shstrndx]
    sym = struct.Struct(end + ("IBBHQQ" if is64 else "IIIBBH"))
    for header in sections:
        if header[1] not in (_SHT_SYMTAB, _SHT_DYNSYM) or _string(data, names, header[0]) != table:
            continue
        if header[4] >= len(sections) or header[5] < sym.size:
            raise ElfSymbolError(f"{table}: bad string table link {header[4]} or entry size {header[5]}")
        strings = sections[header[4]]
        offset, size, entsize = header[2], header[3], header[5]
        if offset + size > len(data):
            raise ElfSymbolError(f"{table} lies outside the file")
        for pos in range(offset + entsize, offset + size - sym.size + 1, entsize):  # entry 0 is the null symbol
            fields = sym.unpack_from(data, pos)
            name_at, info, shndx = (fields[0], fields[1], fields[3]) if is64 else (fields[0], fields[3], fields[5])
            if name_at == 0 or info >> 4 == _STB_LOCAL:
                continue
            name = _string(data, strings, name_at).split("@")[0]
            (undefined if shndx == _SHN_UNDEF else defined).add(name)
    return defined, undefined


def global_symbols(path: Path, table: str = ".dynsym") -> tuple[frozenset[str], frozenset[str]]:
    """``(defined, undefined)``: the names (symbol versions after ``@`` stripped) of the non-local symbols of
    ``path``'s symbol table section named ``table`` (``.dynsym``; ``.symtab`` for an object file); a symbol
    whose section index is ``SHN_UNDEF`` is undefined (imported).  Empty sets when there is no such section.

    Raises:
        OSError: ``path`` cannot be read.
        ElfSymbolError: it is not an ELF file, or its section headers or that table are cut off or malformed."""
    with open(path, "rb") as f:
        try:
            data: mmap.mmap | bytes = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file cannot be mapped
            data = b""
        try:
            defined, undefined = _read(data, table)
        finally:
            if isinstance(data, mmap.mmap):
                data.close()
    return frozenset(defined), frozenset(undefined)
