"""Static checks of a candidate: its source text before the build, its built library's symbols after.

Candidates are LLM output scored on speed; the checks look for what a kernel never needs and a cheat does.
Each hit has a code and a reason.  **Rejecting** hits (the job ends ``rejected_input``, error kind
``forbidden``) are what no MNN kernel does: creating processes, network, ``dlopen``, file I/O, reading
``/proc``/``/sys``/``/dev``, raw ``syscall`` (also from inline assembly), signals, moving file descriptors
(``dup2``, ``pipe``: the runner's clock stamps go out on stderr), changing its CPUs, priority or
limits (``sched_setaffinity``: a kernel unpinned from the timing's core), including a path outside the tree or an implementation
file (another kernel's ``.cpp``, the kit's cache) and, in the built library, defining a libc function (the symbol
would replace libc's for the whole runner: a patched clock, a patched ``memcpy``) or importing one no kernel
needs (``fork``, ``socket``, ``dlopen``, ``fopen``, ...).  **Flagging** hits (kept in the record's ``flags`` and listed in
the report; the job goes on) are legitimate sometimes: starting threads outside MNN's thread pool, calling MNN's
own compute routines that the native kernel of the task calls (the candidate may be scored for MNN's work),
handing the op to another op's kernel (:mod:`kit.stages.delegation`).

Source checks run on the candidate's files as written (comments and string literals included: a rule hit in
a comment is still a hit, the reason says where).  Symbol checks compare the dynamic symbols of the
candidate's ``libMNN.so`` with the native one's (:mod:`kit.stages.elfsyms`): what the candidate *adds*.
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kit.results.outcomes import StageFailure
from kit.results.records import ErrorKind, Flag, Status
from kit.stages.delegation import delegation_flags
from kit.stages.elfsyms import ElfSymbolError, global_symbols

#: flag codes
THREADS = "threads"
NATIVE_ROUTINES = "native_routines"
IGNORED_RESPONSE = "ignored_response_part"


@dataclass(frozen=True)
class Rule:
    """A source pattern: ``code``, the regex, ``reject`` (else flag), and the reason in words."""

    code: str
    pattern: re.Pattern[str]
    reject: bool
    reason: str


def _rule(code: str, pattern: str, reject: bool, reason: str) -> Rule:
    return Rule(code, re.compile(pattern, re.MULTILINE), reject, reason)


RULES: tuple[Rule, ...] = (
    _rule("process", r"\b(fork|vfork|execl|execle|execlp|execv|execve|execvp|execvpe|posix_spawnp?|system|popen)"
          r"\s*\(", True, "creates a process"),
    _rule("network", r"\b(socket|connect|getaddrinfo|gethostbyname|sendto|recvfrom)\s*\(", True, "uses the network"),
    _rule("dlopen", r"\b(dlopen|dlsym|dlmopen)\s*\(", True, "loads code at run time"),
    _rule("file_io", r"\b(fopen|freopen|fdopen|creat|openat|open|unlink|mkdir)\s*\(|"
          r"std::(?:i|o)?fstream|\bstd::filesystem\b", True, "reads or writes files"),
    _rule("host_paths", r"\"/(proc|sys|dev|etc|tmp|root|home)\b", True, "names a host path"),
    _rule("syscall", r"\bsyscall\s*\(|\b__NR_\w+", True, "makes raw system calls"),
    _rule("signals", r"\b(signal|sigaction|raise|kill|alarm|setitimer)\s*\(", True, "installs or sends signals"),
    _rule("affinity", r"\b(sched_setaffinity|pthread_setaffinity_np|sched_setscheduler|setpriority|nice|setrlimit|"
          r"prlimit|prctl)\s*\(|\bCPU_SET\b", True, "changes its CPUs, priority or limits (the timing pins both sides alike)"),
    # the runner streams its clock stamps on stderr (kit.mnn.stamps): a kernel never needs to move a descriptor
    _rule("descriptors", r"\b(dup|dup2|dup3|pipe|pipe2)\s*\(", True, "redirects the process's file descriptors"),
    _rule("asm_syscall", r"\b(asm|__asm__|__asm)\b[^;]*?\b(syscall|sysenter|svc|int\s*\$?0x80)\b", True,
          "makes system calls from inline assembly"),
    # `using namespace std; thread t(f)` spells no std:: (a reviewer's probe): the types as words, declared or
    # constructed, as template arguments, and the C calls
    _rule(THREADS, r"\b(?:std\s*::\s*)?j?thread\b\s*(?:\w+\s*)?[({]|<\s*(?:std\s*::\s*)?j?thread\s*>|"
          r"\bstd\s*::\s*(?:j?thread|async)\b|\basync\s*\(|\bpthread_create\s*\(", False,
          "starts threads outside MNN's thread pool"),
)
_INCLUDE = re.compile(r"^\s*(?:#|%:)\s*include\s*[<\"]([^>\"]+)[>\"]", re.MULTILINE)
#: every inclusion directive (``%:`` is the digraph of ``#``), to refuse the forms the path checks cannot read: a
#: computed ``#include MACRO`` (a reviewer's probe included a kernel's .cpp so), ``#include_next``, ``#import``
_DIRECTIVE = re.compile(r"^\s*(?:#|%:)\s*(include_next|import|include)\b\s*(\S?)", re.MULTILINE)
_MNN_ROUTINE = re.compile(r"\b(MNN[A-Z]\w*)\s*\(")
_IMPLEMENTATION = (".c", ".cc", ".cpp", ".cxx", ".c++", ".S", ".s", ".inc")


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def check_sources(files: Mapping[str, str], originals: Mapping[str, str] | None = None,
                  places: Mapping[str, str] | None = None) -> list[Flag]:
    """The flags of the candidate's ``files`` (basename → text), after refusing a rejecting hit.

    ``originals``: the text of the files the candidate replaces, from the pristine tree (for the
    :data:`NATIVE_ROUTINES` flag: MNN routines the native kernel calls that the candidate calls too).
    ``places``: basename → the file's path in the tree; an include with ``..`` that stays inside the tree from
    there is allowed (MNN's own ``OnnxGemm.cpp`` includes ``../merge/MergeHelpers.hpp``), any other is not.

    Raises:
        StageFailure: REJECTED_INPUT (FORBIDDEN) naming the file, the line and the rule, at the first rejecting hit.
    """
    flags: list[Flag] = []
    for name, text in sorted(files.items()):
        text = text.replace("\\\n", "")  # lines spliced first, as the compiler does (`#inc\` + `lude` is `#include`)
        _check_includes(name, text, (places or {}).get(name))
        for rule in RULES:
            m = rule.pattern.search(text)
            if m is None:
                continue
            where = f"{name}:{_line(text, m.start())}: {rule.reason} ({m.group(0).strip()!r})"
            if rule.reject:
                raise StageFailure(Status.REJECTED_INPUT, ErrorKind.FORBIDDEN, where)
            flags.append(Flag(code=rule.code, reason=where))
    flags += _native_routines(files, originals or {})
    flags += delegation_flags(files, originals or {})
    return flags


def _check_includes(name: str, text: str, place: str | None = None) -> None:
    for m in _DIRECTIVE.finditer(text):
        if m.group(1) != "include" or m.group(2) not in ("<", '"'):
            form = "a computed #include (a macro names the file)" if m.group(1) == "include" else f"#{m.group(1)}"
            raise StageFailure(Status.REJECTED_INPUT, ErrorKind.FORBIDDEN,
                               f"{name}:{_line(text, m.start())}: uses {form}, which the kit cannot check")
    for m in _INCLUDE.finditer(text):
        path = m.group(1)
        bad = None
        if path.startswith("/"):
            bad = "an absolute path"
        elif any(part == ".." for part in Path(path).parts) and (
                place is None or posixpath.normpath(posixpath.join(posixpath.dirname(place), path)).startswith("..")):
            bad = "a path that leaves the tree"
        elif path.endswith(_IMPLEMENTATION):
            bad = "an implementation file"
        if bad is not None:
            raise StageFailure(Status.REJECTED_INPUT, ErrorKind.FORBIDDEN,
                               f"{name}:{_line(text, m.start())}: includes {bad} ({path!r})")


def _native_routines(files: Mapping[str, str], originals: Mapping[str, str]) -> list[Flag]:
    native = {r for text in originals.values() for r in _MNN_ROUTINE.findall(text)}
    used = {r for text in files.values() for r in _MNN_ROUTINE.findall(text)}
    shared = sorted(native & used)
    if not shared:
        return []
    return [Flag(code=NATIVE_ROUTINES, reason="calls MNN routines the native kernel of this task calls: "
                 + ", ".join(shared[:8]) + (" ..." if len(shared) > 8 else ""))]


def response_flags(notes: Iterable[str]) -> list[Flag]:
    """The parts of a raw response that were ignored (other languages, blocks naming no file, paths outside
    the tree), as flags: a reviewer sees them."""
    return [Flag(code=IGNORED_RESPONSE, reason=n) for n in notes]


# ---------------------------------------------------------------------------------------------- symbols

#: libraries whose exported functions a candidate must not define
LIBC_PATHS = ("/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6",
              "/usr/lib/aarch64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6")
#: imported functions no kernel needs (the candidate's library adds an undefined reference to one)
FORBIDDEN_IMPORTS = frozenset({
    "fork", "vfork", "execve", "execv", "execvp", "execl", "execlp", "execle", "execvpe", "system", "popen",
    "posix_spawn", "posix_spawnp", "socket", "connect", "bind", "listen", "accept", "getaddrinfo", "dlopen",
    "dlmopen", "dlsym", "fopen", "fopen64", "freopen", "open", "open64", "openat", "creat", "syscall", "ptrace",
    "kill", "sigaction", "signal", "mprotect", "sched_setaffinity", "pthread_setaffinity_np", "sched_setscheduler",
    "setpriority", "nice", "setrlimit", "prlimit", "prlimit64", "prctl", "dup", "dup2", "dup3", "pipe", "pipe2",
})


@dataclass(frozen=True)
class Symbols:
    """A shared library's dynamic symbols: ``defined`` (exported functions and objects) and ``undefined``
    (what it imports), by name (versions stripped)."""

    defined: frozenset[str]
    undefined: frozenset[str]


def read_symbols(path: Path, table: str = ".dynsym") -> Symbols:
    """The dynamic symbols of the ELF file ``path`` (``table = ".symtab"``: the global symbols of an object
    file).

    Raises:
        OSError: it cannot be read.  ValueError: it is not an ELF file."""
    try:
        defined, undefined = global_symbols(path, table)
    except ElfSymbolError as exc:
        raise ValueError(f"{path}: not an ELF file: {exc}") from exc
    return Symbols(defined, undefined)


@functools.cache
def libc_functions() -> frozenset[str]:
    """The functions libc (and libm) export here (names), or empty where none is found."""
    out: set[str] = set()
    for p in LIBC_PATHS:
        if Path(p).is_file():
            out |= read_symbols(Path(p)).defined
    return frozenset(out)


def check_objects(objects: Iterable[Path]) -> None:
    """:func:`check_library` for the object files compiled from a candidate's sources (a static build, whose
    library is an archive linked into the runner): none may define a libc function or import one no kernel
    needs (MNN's own kernel objects do neither).

    Raises:
        StageFailure: REJECTED_INPUT (FORBIDDEN) naming the object and the symbols."""
    empty = Symbols(frozenset(), frozenset())
    for obj in objects:
        check_library(obj, empty, table=".symtab")


def check_library(candidate: Path, native: Symbols, table: str = ".dynsym") -> None:
    """Refuse a candidate library that defines a libc function or imports one no kernel needs, beside what
    ``native`` (the native build of the same library) already defines and imports.

    Raises:
        StageFailure: REJECTED_INPUT (FORBIDDEN) naming the symbols."""
    cand = read_symbols(candidate, table)
    libc = libc_functions()
    interposed = sorted((cand.defined - native.defined) & libc)
    if interposed:
        raise StageFailure(Status.REJECTED_INPUT, ErrorKind.FORBIDDEN,
                           f"{candidate.name} defines libc functions {interposed[:8]} (they would replace libc's "
                           f"for the whole runner)")
    imports = sorted((cand.undefined - native.undefined) & FORBIDDEN_IMPORTS)
    if imports:
        raise StageFailure(Status.REJECTED_INPUT, ErrorKind.FORBIDDEN,
                           f"{candidate.name} calls {imports[:8]}, which no kernel needs")
