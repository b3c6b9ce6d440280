"""Why a build of the pristine tree (or its configure) failed, in one line: the first real error of its output and
what to do about it, for :class:`kit.mnn.native.NativeBuildError` and :class:`kit.mnn.build.ConfigureError`.

The first real error is the first line, in output order, that is a compiler diagnostic (``file:line:col:
error: ...``), a tool's own error (``ccache: error: ...``, ``c++: fatal error: ...``, ``ninja: error: ...``), a
shell that found no program (``/bin/sh: 1: ccachex: not found``), a CMake error (``CMake Error at f:6
(project):`` with its indented message) or a linker error; never ninja's summary (``ninja: build stopped:
cannot make progress due to previous errors.``), a ``FAILED:`` line, a command line or ``collect2``'s
``ld returned 1 exit status`` (the linker's own line comes before it).  A user saw only the summary while the
cause (``ccache: error: Failed to create directory ~/.cache/mkb/ccache/tmp: Read-only file system``) was 60
lines up.  A hint follows where the cause is known (a cache folder that cannot be written, a missing program
and its Debian package, a compiler out of memory).

The whole output is kept in a file of the workspace (:func:`keep_log`) instead of in the message.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from kit.host import proc
from kit.host.target import Target
from kit.mnn import toolchain

#: Debian packages of the programs a build runs
PACKAGES = {"cmake": "cmake", "ninja": "ninja-build", "c++": "g++", "g++": "g++", "cc": "gcc", "gcc": "gcc",
            "ccache": "ccache", "ld": "binutils", "as": "binutils", "bwrap": "bubblewrap"}
#: longest cause kept (characters); a CMake message can run over many lines
MAX_CAUSE = 400

# gcc/clang: path:line:col: error: message (warnings and notes are not causes)
_COMPILER = re.compile(r"^(?P<file>[^:\s][^:]*):(?P<line>\d+):(?:\d+:)? (?:fatal error|error): (?P<msg>.+)$")
# a program's own error: "ccache: error: ...", "c++: fatal error: ...", "ninja: error: ...", "/usr/bin/ld: ..."
_TOOL = re.compile(r"^(?P<prog>[^\s:]+): (?:fatal error|error|fatal): (?P<msg>.+)$")
# the shell ninja runs each command with, when the command's program is missing
_SHELL = re.compile(r"^(?:/bin/|/usr/bin/)?(?:da|ba)?sh: (?:\d+: )?(?:line \d+: )?(?P<prog>[^:]+): "
                    r"(?P<msg>not found|No such file or directory|Permission denied|cannot execute.*)$")
# GNU ld: "/usr/bin/ld: cannot find -lfoo", "x.cpp:(.text+0x1): undefined reference to `f'"
_LINKER = re.compile(r"^(?:\S*/)?ld(?:\.\w+)?: (?P<msg>(?:cannot|undefined|.*error).*)$"
                     r"|^[^:\s]+:\([^)]*\): (?P<ref>(?:undefined reference|multiple definition).*)$")
_CMAKE_AT = re.compile(r"^CMake Error at (?P<where>[^\n]+):$")
_CMAKE = re.compile(r"^CMake Error: (?P<msg>.+)$")
# lines that are never the cause: ninja's summary and status, a failed step's header, collect2's echo
_NOISE = re.compile(r"^(?:ninja: build stopped|FAILED: |\[\d+/\d+\] |collect2: error: ld returned)")



class CauseError(Exception):
    """A failure told in one line, :attr:`cause`, then where the whole output is kept (:attr:`log`, a file;
    None when it could not be written), named after :attr:`OUTPUT` ("the build's", "cmake's")."""

    OUTPUT = "the whole output"

    def __init__(self, cause: str, log: Path | None = None) -> None:
        super().__init__(cause + (f"\n({self.OUTPUT}: {log})" if log is not None else ""))
        self.cause = cause
        self.log = log

    def __reduce__(self) -> tuple[type, tuple[str, Path | None]]:  # pickled (Ray) with both fields, not the message
        return type(self), (self.cause, self.log)


def first_error(output: str, src: Path | None = None) -> str:
    """The first real error line of a build's or configure's ``output`` (see the module docstring), on one line
    and at most :data:`MAX_CAUSE` characters; a compiler diagnostic's path relative to the tree ``src`` when it
    lies in it.  "" when there is none."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        line = line.rstrip()
        if not line or _NOISE.match(line):
            continue
        if m := _COMPILER.match(line):
            path = _in_tree(m["file"], src)
            return _short(f"{path}:{m['line']}: error: {m['msg']}")
        if m := _CMAKE_AT.match(line):
            return _short(f"CMake Error at {m['where']}: {_cmake_message(lines[i + 1:])}")
        for pattern in (_SHELL, _CMAKE, _LINKER, _TOOL):
            if pattern.match(line):
                return _short(line.strip())
    return ""


def _cmake_message(rest: list[str]) -> str:
    """The indented message under a ``CMake Error at ...:`` line, up to the end of its first sentence: its first
    paragraph, and the next ones while the text so far does not end with a full stop (``The CMAKE_CXX_COMPILER:``
    / ``/nonexistent/g++`` / ``is not a full path to an existing compiler tool.``), at most 4."""
    said: list[str] = []
    paragraph: list[str] = []
    for line in [*rest, ""]:
        if line.strip() and line.startswith(" "):
            paragraph.append(line.strip())
            continue
        if paragraph:
            said.append(" ".join(paragraph))
            paragraph = []
        if not line.strip() and said and not said[-1].endswith(".") and len(said) < 4:
            continue  # a blank line inside the sentence
        break
    return " ".join(said)


def _in_tree(path: str, src: Path | None) -> str:
    if src is not None:
        for base in (str(src), str(src.resolve())):
            if path.startswith(base.rstrip("/") + "/"):
                return path[len(base.rstrip("/")) + 1:]
    return path


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_CAUSE else text[: MAX_CAUSE - 3] + "..."


def hint(error: str, cache_dir: Path) -> str:
    """What to do about ``error`` (a :func:`first_error` line) where that is known, else ""; ``cache_dir`` is
    ``mnn.cache_dir`` (ccache's folder is ``<cache_dir>/ccache``)."""
    for test, advice in _HINTS:
        if test.search(error) and (said := advice(error, cache_dir)):
            return said
    return ""


def _program_hint(error: str, cache_dir: Path) -> str:
    m = _SHELL.match(error) or re.match(r"^(?P<prog>[^\s:]+): .*No such file or directory", error)
    if m is None:
        return ""
    prog = m["prog"].strip()
    if os.sep in prog:  # a path: named in the build's configuration (mnn.cmake_args: a launcher, a compiler)
        return f"{prog} does not exist: check the programs mnn.cmake_args names"
    return install_hint(prog)


def install_hint(prog: str) -> str:
    """``install <prog> (Debian: apt-get install <package>)``; the package when the kit knows it."""
    pkg = PACKAGES.get(prog)
    return f"install {prog} (Debian: apt-get install {pkg})" if pkg else f"install {prog} or put it on PATH"


#: (pattern, advice(error, cache_dir)): the first whose pattern matches the error gives the hint
_HINTS: list[tuple[re.Pattern[str], Callable[[str, Path], str]]] = [
    (re.compile(r"No space left on device"),
     lambda e, c: f"the disk is full: free space on the file system of mnn.cache_dir ({c})"),
    (re.compile(r"^ccache: error: .*(?:Read-only file system|Permission denied|Not a directory|Failed to create|"
                r"File exists)"),
     lambda e, c: f"ccache cannot write its folder {c / 'ccache'}: make it a writable folder, point mnn.cache_dir "
                  f"elsewhere, or set build.ccache = false"),
    (re.compile(r"Killed signal terminated program|virtual memory exhausted|Cannot allocate memory|out of memory"),
     lambda e, c: "the compiler ran out of memory: lower build.jobs, or raise sandbox.build_memory_mb"),
    (re.compile(r"No CMAKE_CXX_COMPILER could be found|Could not find compiler set in environment variable CXX"),
     lambda e, c: install_hint("c++")),
    (re.compile(r"No CMAKE_C_COMPILER could be found|Could not find compiler set in environment variable CC\b"),
     lambda e, c: install_hint("cc")),
    (re.compile(r"unable to find a build program corresponding to \"Ninja\""), lambda e, c: install_hint("ninja")),
    (re.compile(r"COMPILER: .* is not a full path to an existing compiler tool"),
     lambda e, c: "check the compiler mnn.cmake_args names (CMAKE_CXX_COMPILER, CMAKE_C_COMPILER)"),
    (re.compile(r"not found$|No such file or directory"), _program_hint),
    (_COMPILER, lambda e, c: "the pristine tree does not compile with this compiler: check mnn.source_dir "
                             "(or mnn.version) and the compiler (c++ --version)"),
]


def failure_line(what: str, output: str, cache_dir: Path, src: Path | None = None, exit_code: int | None = None) -> str:
    """``<what> failed: <first error>; <hint>``, one line, for a failed build or configure whose ``output`` is
    given; without a recognisable error, the exit status and the output's last line."""
    error = first_error(output, src)
    if not error:
        last = next((ln.strip() for ln in reversed(output.splitlines()) if ln.strip() and not _NOISE.match(ln)), "")
        status = f" (exit {exit_code})" if exit_code is not None else ""
        return _short(f"{what} failed{status} with no compiler or tool error in its output; its last line: {last}")
    advice = hint(error, cache_dir)
    return f"{what} failed: {error.rstrip('.')}; {advice}" if advice else f"{what} failed: {error}"


def killed_line(what: str, signal: int, done: int, total: int) -> str:
    """``<what> was killed by signal S at step k/n``: ninja ended by a signal the kit did not send (the kernel's
    out-of-memory killer, another process), whose output holds no error of its own."""
    step = f"{done}/{total}" if total else f"{done}"
    return (f"{what} was killed by signal {signal} at step {step}, from outside the build (the kernel's "
            f"out-of-memory killer, or another process); run it again, with fewer build.jobs if memory is short")


def timeout_line(what: str, wall_s: float, done: int, total: int, stalled: bool, limit_s: float) -> str:
    """``<what> timed out after N s at step k/n (no step finished in M s)`` for a build the stall limit stopped
    (``limit_s``: ``build.stall_timeout_s``), ``(build.timeout_s = T s)`` for one its fixed total stopped;
    ``at step k`` when the build was not planned (``total`` 0)."""
    step = f"{done}/{total}" if total else f"{done}"
    if stalled:
        return (f"{what} timed out after {wall_s:.0f} s at step {step} (no step finished in {limit_s:g} s); if the "
                f"machine is only slow or busy, raise build.stall_timeout_s")
    return f"{what} timed out after {wall_s:.0f} s at step {step} (build.timeout_s = {limit_s:g} s)"


def keep_log(path: Path, output: str) -> Path | None:
    """Write ``output`` (a failed build's or configure's) to ``path``; None when that fails (the message then
    names no file: the cause line must come out even when the workspace cannot be written)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(output)
    except OSError:
        return None
    return path


def missing_tool(engine: str, target: Target, what: str) -> str:
    """The line saying which program ``what`` (a build) needs and does not find on PATH: cmake, ninja and, for
    a native build, the C++ compiler CMake takes (``c++``; for MNN also ``cc``), with their Debian packages;
    "" when none is missing.  A cross build's compilers are :func:`kit.mnn.toolchain.check_tools`'s.  In a
    container the image's programs count, not this host's: "" there."""
    if proc.current_container() is not None:
        return ""
    needed = ["cmake", "ninja"]
    if not target.cross:
        needed.append(toolchain.cxx(target))
        if engine == "mnn":  # MNN's project has C (and assembler) sources too; the fixture engine is C++ only
            needed.append("cc")
    missing = [p for p in needed if proc.which(p, proc.base_env()) is None]
    if not missing:
        return ""
    path = proc.base_env().get("PATH", "")
    return (f"{what} needs {', '.join(missing)}, not found on PATH ({path}): "
            + "; ".join(install_hint(p) for p in missing))
