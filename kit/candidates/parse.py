"""Raw LLM responses → named files, as the paper's prompt asks for them.

Each fenced code block (```` ``` ```` or ``~~~``, with an empty or C/C++ info string) whose first line
names the file (``// CPUArgMax.cpp``, ``// File: CPUArgMax.cpp``, ``/* CPUArgMax.hpp */``, ``CPUArgMax.cpp``,
``// source/backend/cpu/CPUArgMax.cpp``) becomes one file; the name line is dropped from the content.
Nothing here checks the names against a task: that is :mod:`kit.candidates.allowlist`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: info strings of fenced blocks that may hold a candidate file (lower case; "" = no language)
CODE_LANGS = frozenset({"", "cpp", "c++", "cxx", "cc", "c", "h", "hpp", "hxx", "objective-c++", "objc++"})

_FENCE_OPEN = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>.*?)[ \t]*$")
_NAME_LINE = re.compile(
    r"""^(?:
        //+\s*(?:(?:file\s*name|filename|file|path)\s*:\s*)?(?P<a>\S+?)\s*
      | /\*+\s*(?:(?:file\s*name|filename|file|path)\s*:\s*)?(?P<b>\S+?)\s*\*+/
      | (?:(?:file\s*name|filename|file|path)\s*:\s*)?(?P<c>\S+?)
    )$""",
    re.IGNORECASE | re.VERBOSE,
)
_LOOKS_LIKE_FILE = re.compile(r"^\S*[^\s/\\.]\.[A-Za-z][A-Za-z0-9+]{0,7}$")
_NOT_A_NAME_CHARS = set("(){};<>=,\"'")


@dataclass
class ParsedResponse:
    """Outcome of :func:`parse_response`: named files (path as written → text) and notes."""

    files: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    blocks: int = 0


def _file_name_of(line: str) -> str | None:
    """The file path named by a block's first line, or None if the line names no file."""
    s = line.strip()
    if not s or s.startswith("#"):
        return None
    m = _NAME_LINE.match(s)
    if not m:
        return None
    name = next(g for g in (m.group("a"), m.group("b"), m.group("c")) if g is not None)
    name = name.strip("`'\"*")
    if not name or any(ch in _NOT_A_NAME_CHARS for ch in name):
        return None
    if _LOOKS_LIKE_FILE.match(name) or _looks_like_escape(name):
        return name
    return None


def _looks_like_escape(name: str) -> bool:
    """A path without an extension that tries to leave the tree (``../../etc/passwd``, ``/etc/passwd``)."""
    return ("/" in name or "\\" in name) and (
        ".." in name or name.startswith(("/", "~", "\\")) or bool(re.match(r"^[A-Za-z]:", name))
    )


def _name_in_info(info: str) -> str | None:
    """A file name given in the info string (```` ```cpp CPUArgMax.cpp ```` or ```` ```cpp:CPUArgMax.cpp ````)."""
    for token in re.split(r"[\s:]+", info)[1:]:
        token = token.strip("`'\"")
        if token.lower().startswith(("title=", "file=", "filename=")):
            token = token.split("=", 1)[1].strip("'\"")
        if _LOOKS_LIKE_FILE.match(token) and not any(ch in _NOT_A_NAME_CHARS for ch in token):
            return token
    return None


def _read_block(lines: list[str], i: int, fence: str) -> tuple[list[str], bool, int]:
    """The body of a block opened by ``fence`` on the line before ``lines[i]``.

    Returns (body lines, whether a closing fence was found, index of the first line after the block).
    The closing fence is the same character at least as long, indented <= 3 spaces (CommonMark).
    """
    close_re = re.compile(r"^ {0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$")
    body: list[str] = []
    while i < len(lines):
        if close_re.match(lines[i]):
            return body, True, i + 1
        body.append(lines[i])
        i += 1
    return body, False, i


def parse_response(text: str) -> ParsedResponse:
    """Split a raw LLM response into named files.

    Fences follow CommonMark: an opening line of >= 3 backticks or tildes (indent <= 3 spaces), closed by a
    line of the same character at least as long; an unclosed block runs to the end (noted).  Blocks whose
    info string names a non-C/C++ language are ignored; so are blocks whose first line names no file.
    CRLF and CR line endings are normalised to LF.  A file named twice: the last block wins (noted).
    Never raises.
    """
    out = ParsedResponse()
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    i = 0
    while i < len(lines):
        m = _FENCE_OPEN.match(lines[i])
        if not m or (m.group("fence")[0] == "`" and "`" in m.group("info")):
            i += 1
            continue
        info = m.group("info")
        opened_at = i + 1
        body, closed, i = _read_block(lines, i + 1, m.group("fence"))
        out.blocks += 1
        lang = info.split()[0].lower() if info.split() else ""
        lang = lang.split(":")[0]
        if lang not in CODE_LANGS:
            out.notes.append(f"block at line {opened_at} ignored: language {lang!r} is not C/C++")
            continue
        if not closed:
            out.notes.append(
                f"block at line {opened_at} has no closing fence: taken up to the end of the response"
            )
        name = _file_name_of(body[0]) if body else None
        if name is not None:
            body = body[1:]
        else:
            name = _name_in_info(info)
        if name is None:
            first = body[0].strip()[:60] if body else ""
            out.notes.append(f"block at line {opened_at} ignored: its first line names no file ({first!r})")
            continue
        content = "\n".join(body)
        if content and not content.endswith("\n"):
            content += "\n"
        if name in out.files:
            out.notes.append(
                f"file {name!r} appears more than once: the block at line {opened_at} (the last) wins"
            )
            del out.files[name]  # keep insertion order = order of the winning blocks
        out.files[name] = content
    return out
