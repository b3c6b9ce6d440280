"""Candidates: the files one LLM sample produced for one task, parsed and checked against the task's allowlist.

Sources (:class:`kit.config.CandidateSource`):

- a directory ``<path>/<task_id>/<sample_id>/<files>``;
- a JSONL file whose lines are ``{"task_id", "sample_id", "response": "<raw LLM text>"}`` or
  ``{"task_id", "sample_id", "files": {"CPUArgMax.cpp": "..."}}``.

:func:`load_candidates` never raises for bad candidate *content*: every bad candidate becomes a
:class:`Rejection` (the pipeline turns it into a ``rejected_input`` record).  It raises
:class:`CandidateSourceError` only for harness-level problems (missing source, a JSONL line that is not a
JSON object or has no usable ``task_id``/``sample_id``, the same ``(task_id, sample_id)`` twice).

Raw responses are parsed as the paper's prompt asks: each fenced code block (```` ``` ```` or ``~~~``, with
an empty or C/C++ info string) whose first line names the file (``// CPUArgMax.cpp``,
``// File: CPUArgMax.cpp``, ``/* CPUArgMax.hpp */``, ``CPUArgMax.cpp``, ``// source/backend/cpu/CPUArgMax.cpp``).
The name line is dropped from the file content.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict

from kit.config import CandidateSource
from kit.records import ErrorKind
from kit.tasks import Task

log = logging.getLogger(__name__)

NATIVE_METHOD = "native"
NAME_RE = re.compile(r"^[A-Za-z0-9_.+-]+$")
SAMPLE_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
#: info strings of fenced blocks that may hold a candidate file (lower case; "" = no language)
CODE_LANGS = frozenset({"", "cpp", "c++", "cxx", "cc", "c", "h", "hpp", "hxx", "objective-c++", "objc++"})


class CandidateSourceError(Exception):
    """A harness-level problem with a candidate source; the message names the file (and line)."""


class Candidate(BaseModel):
    """Files of one sample for one task, all allowed by ``Task.place``.

    ``files`` maps basename → UTF-8 text; ``sha256`` is over the sorted (name, content) pairs;
    ``origin`` is the sample directory or ``<file>.jsonl:<line>``; ``notes`` are parse remarks
    (ignored blocks, duplicates) worth logging.
    """

    model_config = ConfigDict(frozen=True)

    method: str
    task_id: str
    sample_id: str
    files: dict[str, str]
    sha256: str
    origin: str
    notes: tuple[str, ...] = ()

    def placements(self, task: Task) -> dict[str, str]:
        """MNN-relative path → content for every file (paths from ``task.place``)."""
        out: dict[str, str] = {}
        for name, text in self.files.items():
            dest = task.place(name)
            if dest is None:  # cannot happen for a checked candidate; guard against a task/candidate mix-up
                raise ValueError(f"{self.origin}: file {name!r} is not allowed for task {task.id!r}")
            out[dest] = text
        return out


class Rejection(BaseModel):
    """A candidate refused before any build: becomes a ``rejected_input`` record with ``error_kind``.

    ``sha256`` hashes whatever raw input there was (response text or files), so the record still has a
    stable ``candidate_sha256``.  ``error_kind == ErrorKind.NO_NATIVE`` marks the native method of a task
    with no native files (see :func:`native_candidate`).
    """

    model_config = ConfigDict(frozen=True)

    method: str
    task_id: str
    sample_id: str
    reason: str
    error_kind: ErrorKind
    sha256: str
    origin: str
    notes: tuple[str, ...] = ()


CandidateOrRejection = Candidate | Rejection


# ---------------------------------------------------------------------------------------------- hashing


def files_sha256(files: Mapping[str, str | bytes]) -> str:
    """sha256 (hex) over the sorted ``name\\0len\\0content`` entries; text is hashed as UTF-8
    (lone surrogates as ``surrogateescape`` bytes, so un-encodable text still hashes)."""
    h = hashlib.sha256()
    for name in sorted(files):
        data = _as_bytes(files[name])
        h.update(name.encode("utf-8", "surrogateescape") + b"\0" + str(len(data)).encode() + b"\0")
        h.update(data)
    return h.hexdigest()


def _as_bytes(content: str | bytes) -> bytes:
    if isinstance(content, bytes):
        return content
    return content.encode("utf-8", "surrogatepass")


def _text_sha256(text: str) -> str:
    return hashlib.sha256(_as_bytes(text)).hexdigest()


# ---------------------------------------------------------------------------------------------- parsing

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
        fence = m.group("fence")
        info = m.group("info")
        opened_at = i + 1
        body: list[str] = []
        i += 1
        closed = False
        close_re = re.compile(r"^ {0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$")
        while i < len(lines):
            if close_re.match(lines[i]):
                closed = True
                i += 1
                break
            body.append(lines[i])
            i += 1
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


# ---------------------------------------------------------------------------------------------- checks


class _Reject(Exception):
    def __init__(self, kind: ErrorKind, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


def _basename(path: str) -> str:
    """The basename of a candidate path; traversal, absolute and backslash paths raise ``_Reject``."""
    if "\\" in path:
        raise _Reject(
            ErrorKind.ALLOWLIST, f"file name {path!r} contains a backslash (path traversal refused)"
        )
    if path.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", path):
        raise _Reject(ErrorKind.ALLOWLIST, f"file name {path!r} is an absolute path (refused)")
    parts = PurePosixPath(path).parts
    if not parts or any(p in ("..", ".") for p in path.split("/")):
        raise _Reject(
            ErrorKind.ALLOWLIST,
            f"file name {path!r} contains '.' or '..' components (path traversal refused)",
        )
    name = parts[-1]
    if not NAME_RE.match(name):
        raise _Reject(ErrorKind.ALLOWLIST, f"file name {name!r} has characters outside [A-Za-z0-9_.+-]")
    return name


def _allowed_list(task: Task) -> str:
    names = sorted(task.allowed_names) + [PurePosixPath(g).name for g in task.mnn.new_files]
    return ", ".join(names)


def check_files(task: Task, files: Mapping[str, str | bytes], max_file_bytes: int) -> dict[str, str]:
    """Validate candidate files against ``task`` and return basename → text.

    ``files`` keys may be relative POSIX paths (the basename is used).  Checks, in order: names
    (traversal, characters, ``task.place``), duplicates after taking basenames, size
    (``max_file_bytes`` of UTF-8 bytes), UTF-8 and NUL bytes, at least one ``.cpp``.

    Raises:
        _Reject: with the :class:`ErrorKind` and a reason naming the file.
    """
    if not files:
        raise _Reject(ErrorKind.MISSING_FILE, "no files")
    out: dict[str, str] = {}
    for path, content in files.items():
        name = _basename(path)
        if task.place(name) is None:
            raise _Reject(
                ErrorKind.ALLOWLIST,
                f"file {name!r} is not allowed for task {task.id!r} (allowed: {_allowed_list(task)})",
            )
        if name in out:
            raise _Reject(ErrorKind.ALLOWLIST, f"file {name!r} given twice (as different paths)")
        data = _as_bytes(content) if isinstance(content, bytes) else None
        if data is None:
            try:
                data = content.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise _Reject(
                    ErrorKind.NOT_UTF8,
                    f"file {name!r} is not valid UTF-8 text (lone surrogate at {exc.start})",
                ) from None
        if len(data) > max_file_bytes:
            raise _Reject(
                ErrorKind.FILE_TOO_LARGE, f"file {name!r} has {len(data)} bytes > limit {max_file_bytes}"
            )
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Reject(
                ErrorKind.NOT_UTF8, f"file {name!r} is not valid UTF-8 (byte offset {exc.start})"
            ) from None
        if "\0" in text:
            raise _Reject(ErrorKind.NOT_UTF8, f"file {name!r} contains NUL bytes")
        out[name] = text
    if not any(n.endswith(".cpp") for n in out):
        raise _Reject(
            ErrorKind.MISSING_FILE, f"no .cpp file among {sorted(out)} (at least one .cpp is required)"
        )
    return out


def make_candidate(
    method: str,
    task: Task,
    sample_id: str,
    files: Mapping[str, str | bytes],
    max_file_bytes: int,
    origin: str,
    notes: Iterable[str] = (),
) -> CandidateOrRejection:
    """Check ``files`` (name → content) for ``task``; a :class:`Candidate` or a :class:`Rejection`. Never raises."""
    notes = tuple(notes)
    try:
        checked = check_files(task, files, max_file_bytes)
    except _Reject as r:
        return Rejection(
            method=method,
            task_id=task.id,
            sample_id=sample_id,
            reason=r.reason,
            error_kind=r.kind,
            sha256=files_sha256(files),
            origin=origin,
            notes=notes,
        )
    return Candidate(
        method=method,
        task_id=task.id,
        sample_id=sample_id,
        files=checked,
        sha256=files_sha256(checked),
        origin=origin,
        notes=notes,
    )


def candidate_from_response(
    method: str, task: Task, sample_id: str, response: str, max_file_bytes: int, origin: str
) -> CandidateOrRejection:
    """Parse a raw LLM response (see :func:`parse_response`) and check its files. Never raises."""
    if not response.strip():
        return Rejection(
            method=method,
            task_id=task.id,
            sample_id=sample_id,
            reason="empty response",
            error_kind=ErrorKind.PARSE,
            sha256=_text_sha256(response),
            origin=origin,
        )
    parsed = parse_response(response)
    if not parsed.files:
        reason = (
            f"no fenced code block whose first line names a file ({parsed.blocks} fenced block(s) found)"
            if parsed.blocks
            else "no fenced code block in the response"
        )
        return Rejection(
            method=method,
            task_id=task.id,
            sample_id=sample_id,
            reason=reason,
            error_kind=ErrorKind.PARSE,
            sha256=_text_sha256(response),
            origin=origin,
            notes=tuple(parsed.notes),
        )
    result = make_candidate(method, task, sample_id, parsed.files, max_file_bytes, origin, parsed.notes)
    if isinstance(result, Rejection):  # hash the raw response: the parse may have dropped parts of it
        result = result.model_copy(update={"sha256": _text_sha256(response)})
    return result


# ---------------------------------------------------------------------------------------------- sources


def _unknown(method: str, task_id: str, sample_id: str, origin: str, raw_sha: str) -> Rejection:
    return Rejection(
        method=method,
        task_id=task_id,
        sample_id=sample_id,
        reason=f"unknown task id {task_id!r}",
        error_kind=ErrorKind.PARSE,
        sha256=raw_sha,
        origin=origin,
    )


def _sample_id(value: object, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise CandidateSourceError(f"{where}: sample_id must be a string or an integer, got {value!r}")
    sid = str(value)
    if not SAMPLE_ID_RE.match(sid):
        raise CandidateSourceError(f"{where}: sample_id {sid!r} must match {SAMPLE_ID_RE.pattern}")
    return sid


def _read_dir_sample(method: str, task: Task, sample_dir: Path, max_file_bytes: int) -> CandidateOrRejection:
    origin = str(sample_dir)
    sid = sample_dir.name
    files: dict[str, str | bytes] = {}
    notes: list[str] = []
    problem: _Reject | None = None
    for entry in sorted(sample_dir.iterdir()):
        if entry.name.startswith("."):
            notes.append(f"hidden entry {entry.name!r} ignored")
            continue
        if entry.is_symlink():
            problem = problem or _Reject(ErrorKind.ALLOWLIST, f"{entry.name!r} is a symbolic link (refused)")
            continue
        if not entry.is_file():
            problem = problem or _Reject(
                ErrorKind.ALLOWLIST, f"{entry.name!r} is not a regular file (subdirectories are refused)"
            )
            continue
        size = entry.stat().st_size
        if size > max_file_bytes:
            problem = problem or _Reject(
                ErrorKind.FILE_TOO_LARGE, f"file {entry.name!r} has {size} bytes > limit {max_file_bytes}"
            )
            continue
        files[entry.name] = entry.read_bytes()
    if problem is not None:
        return Rejection(
            method=method,
            task_id=task.id,
            sample_id=sid,
            reason=problem.reason,
            error_kind=problem.kind,
            sha256=files_sha256(files),
            origin=origin,
            notes=tuple(notes),
        )
    return make_candidate(method, task, sid, files, max_file_bytes, origin, notes)


def _load_dir(
    source: CandidateSource, tasks: Mapping[str, Task], max_file_bytes: int, ignore_ids: frozenset[str]
) -> tuple[list[CandidateOrRejection], list[str]]:
    out: list[CandidateOrRejection] = []
    unknown: list[str] = []
    for task_dir in sorted(source.path.iterdir()):
        if not task_dir.is_dir() or task_dir.name.startswith("."):
            log.info("%s: %s is not a task directory; ignored", source.path, task_dir.name)
            continue
        tid = task_dir.name
        if tid in ignore_ids:
            continue
        for sample_dir in sorted(task_dir.iterdir()):
            if not sample_dir.is_dir() or sample_dir.name.startswith("."):
                log.info("%s: %s is not a sample directory; ignored", task_dir, sample_dir.name)
                continue
            sid = _sample_id(sample_dir.name, str(sample_dir))
            if tid not in tasks:
                unknown.append(tid)
                out.append(_unknown(source.method, tid, sid, str(sample_dir), files_sha256({})))
                continue
            if task_dir.is_symlink() or sample_dir.is_symlink():
                link = task_dir if task_dir.is_symlink() else sample_dir
                out.append(Rejection(
                    method=source.method, task_id=tid, sample_id=sid, error_kind=ErrorKind.ALLOWLIST,
                    reason=f"{link} is a symbolic link (refused: a sample must lie inside its source)",
                    sha256=files_sha256({}), origin=str(sample_dir),
                ))
                continue
            out.append(_read_dir_sample(source.method, tasks[tid], sample_dir, max_file_bytes))
    return out, unknown


def _load_jsonl(
    source: CandidateSource, tasks: Mapping[str, Task], max_file_bytes: int, ignore_ids: frozenset[str]
) -> tuple[list[CandidateOrRejection], list[str]]:
    out: list[CandidateOrRejection] = []
    unknown: list[str] = []
    errors: list[str] = []
    raw = source.path.read_bytes()
    for lineno, line_bytes in enumerate(raw.split(b"\n"), start=1):
        try:
            _jsonl_line(source, tasks, max_file_bytes, ignore_ids, lineno, line_bytes, out, unknown)
        except CandidateSourceError as exc:  # report every bad line at once, not one per run
            errors.append(str(exc))
    if errors:
        more = f"\n  ... and {len(errors) - 20} more" if len(errors) > 20 else ""
        raise CandidateSourceError(
            f"{source.path}: {len(errors)} invalid line(s):\n  " + "\n  ".join(errors[:20]) + more
        )
    return out, unknown


def _jsonl_line(
    source: CandidateSource, tasks: Mapping[str, Task], max_file_bytes: int, ignore_ids: frozenset[str],
    lineno: int, line_bytes: bytes, out: list[CandidateOrRejection], unknown: list[str],
) -> None:
    """Parse one JSONL line into ``out`` (a candidate or a rejection); raise for a malformed line."""
    where = f"{source.path}:{lineno}"
    # invalid UTF-8 bytes survive as lone surrogates and are caught by the content checks
    line = line_bytes.decode("utf-8", "surrogateescape").strip()
    if line:
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CandidateSourceError(f"{where}: not valid JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise CandidateSourceError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        for key in ("task_id", "sample_id"):
            if key not in obj:
                raise CandidateSourceError(f"{where}: missing key {key!r}")
        tid = obj["task_id"]
        if not isinstance(tid, str) or not tid:
            raise CandidateSourceError(f"{where}: task_id must be a non-empty string, got {tid!r}")
        sid = _sample_id(obj["sample_id"], where)
        if tid in ignore_ids:
            return
        raw_sha = _text_sha256(line)
        if tid not in tasks:
            unknown.append(tid)
            out.append(_unknown(source.method, tid, sid, where, raw_sha))
            return
        out.append(_from_json_obj(source.method, tasks[tid], sid, obj, max_file_bytes, where, raw_sha))


def _from_json_obj(
    method: str, task: Task, sid: str, obj: dict, max_file_bytes: int, where: str, raw_sha: str
) -> CandidateOrRejection:
    def reject(reason: str) -> Rejection:
        return Rejection(
            method=method,
            task_id=task.id,
            sample_id=sid,
            reason=reason,
            error_kind=ErrorKind.PARSE,
            sha256=raw_sha,
            origin=where,
        )

    extra = sorted(set(obj) - {"task_id", "sample_id", "response", "files"})
    notes = [f"keys ignored: {extra}"] if extra else []
    has_resp, has_files = "response" in obj, "files" in obj
    if has_resp == has_files:
        return reject("a line needs exactly one of 'response' or 'files'")
    if has_resp:
        resp = obj["response"]
        if not isinstance(resp, str):
            return reject(f"'response' must be a string, got {type(resp).__name__}")
        result = candidate_from_response(method, task, sid, resp, max_file_bytes, where)
    else:
        files = obj["files"]
        if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
            return reject("'files' must be an object mapping file names to strings")
        result = make_candidate(method, task, sid, files, max_file_bytes, where)
    if notes:
        result = result.model_copy(update={"notes": tuple(notes) + result.notes})
    return result


def load_candidates(
    source: CandidateSource,
    tasks: Mapping[str, Task],
    max_file_bytes: int,
    ignore_ids: Iterable[str] = (),
) -> list[CandidateOrRejection]:
    """All candidates of one method, in source order (directory: sorted by task, then sample).

    Args:
        source: method name and path (a directory or a ``.jsonl`` file).
        tasks: task id → task; candidates for other ids become rejections (reason "unknown task id",
            ``ErrorKind.PARSE``), and their number is logged as a warning.
        max_file_bytes: largest accepted file (UTF-8 bytes).
        ignore_ids: task ids that exist but are not evaluated (e.g. the other split): skipped silently.

    Returns:
        one :class:`Candidate` or :class:`Rejection` per sample.

    Raises:
        CandidateSourceError: the path does not exist; a JSONL line is not a JSON object or lacks a valid
            ``task_id``/``sample_id``; a sample id is not ``[A-Za-z0-9_.-]``; the same
            ``(task_id, sample_id)`` appears twice.  The message names the file and line.
    """
    path = source.path
    ignored = frozenset(ignore_ids)
    if path.is_dir():
        out, unknown = _load_dir(source, tasks, max_file_bytes, ignored)
    elif path.is_file():
        out, unknown = _load_jsonl(source, tasks, max_file_bytes, ignored)
    else:
        raise CandidateSourceError(f"candidates source {source.method!r}: path not found: {path}")
    seen: dict[tuple[str, str], str] = {}
    for c in out:
        key = (c.task_id, c.sample_id)
        if key in seen:
            raise CandidateSourceError(
                f"{c.origin}: duplicate (task_id, sample_id) = {key} (first at {seen[key]}) in source {source.method!r}"
            )
        seen[key] = c.origin
    if unknown:
        log.warning(
            "candidates source %r (%s): %d sample(s) name %d unknown task id(s): %s",
            source.method,
            path,
            len(unknown),
            len(set(unknown)),
            ", ".join(sorted(set(unknown))[:20]),
        )
    rejected = sum(isinstance(c, Rejection) for c in out)
    log.info("candidates source %r: %d sample(s), %d rejected", source.method, len(out), rejected)
    for c in out:
        for note in c.notes:
            log.debug("%s: %s", c.origin, note)
    return out


# ---------------------------------------------------------------------------------------------- native


def native_candidate(task: Task, mnn_root: Path) -> CandidateOrRejection:
    """The tree's own current files for ``task.mnn.files`` (method ``native``, sample ``"0"``).

    Evaluating it is the A/A calibration: same build, same runner, the native kernel on both sides.
    A task whose ``mnn.files`` is empty (only ``new_files``: MNN has no implementation to swap) gets a
    :class:`Rejection` with ``error_kind=ErrorKind.NO_NATIVE``; the pipeline records it as a
    ``rejected_input`` record with that error kind (metrics should leave ``native`` rows out of scoring).

    Raises:
        FileNotFoundError: a path of ``task.mnn.files`` does not exist under ``mnn_root`` (a broken task or
            a wrong ``mnn.source_dir``).
    """
    origin = f"{mnn_root}"
    if not task.mnn.files:
        return Rejection(
            method=NATIVE_METHOD,
            task_id=task.id,
            sample_id="0",
            error_kind=ErrorKind.NO_NATIVE,
            reason=f"task {task.id!r} has no native files (mnn.files is empty; only new_files {task.mnn.new_files})",
            sha256=files_sha256({}),
            origin=origin,
        )
    files: dict[str, str] = {}
    for rel in task.mnn.files:
        p = mnn_root / rel
        if not p.is_file():
            raise FileNotFoundError(
                f"task {task.id!r}: mnn.files entry {rel!r} not found under mnn.source_dir {mnn_root}"
            )
        files[PurePosixPath(rel).name] = p.read_bytes().decode("utf-8", "surrogateescape")
    return Candidate(
        method=NATIVE_METHOD,
        task_id=task.id,
        sample_id="0",
        files=files,
        sha256=files_sha256(files),
        origin=origin,
    )
