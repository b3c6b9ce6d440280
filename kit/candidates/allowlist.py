"""The checks a candidate's files pass before any build, against its task's allowlist.

File names (no traversal, absolute or backslash paths; characters ``[A-Za-z0-9_.+-]``; allowed by
``Task.place``), no name twice, size, UTF-8 without NUL bytes, at least one ``.cpp``.  A failed check is a
:class:`~kit.candidates.model.Rejection`, never an exception to the caller.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath

from kit.candidates.model import (
    NAME_RE,
    Candidate,
    CandidateOrRejection,
    Rejection,
    as_bytes,
    files_sha256,
    text_sha256,
)
from kit.candidates.parse import parse_response
from kit.results.records import ErrorKind
from kit.suite.tasks import Task


class Reject(Exception):
    """A failed check: the :class:`ErrorKind` and a reason naming the file; becomes a :class:`Rejection`."""

    def __init__(self, kind: ErrorKind, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


def files_rejection(
    method: str,
    task: Task,
    sample_id: str,
    refusal: Reject,
    files: Mapping[str, str | bytes],
    origin: str,
    notes: Iterable[str] = (),
) -> Rejection:
    """The :class:`Rejection` of ``files`` for ``refusal``; ``sha256`` is over the files as given (unchecked)."""
    return Rejection(
        method=method,
        task_id=task.id,
        sample_id=sample_id,
        reason=refusal.reason,
        error_kind=refusal.kind,
        sha256=files_sha256(files),
        origin=origin,
        notes=tuple(notes),
    )


def _basename(path: str) -> str:
    """The basename of a candidate path; traversal, absolute and backslash paths raise ``Reject``."""
    if "\\" in path:
        raise Reject(ErrorKind.ALLOWLIST, f"file name {path!r} contains a backslash (path traversal refused)")
    if path.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", path):
        raise Reject(ErrorKind.ALLOWLIST, f"file name {path!r} is an absolute path (refused)")
    parts = PurePosixPath(path).parts
    if not parts or any(p in ("..", ".") for p in path.split("/")):
        raise Reject(
            ErrorKind.ALLOWLIST,
            f"file name {path!r} contains '.' or '..' components (path traversal refused)",
        )
    name = parts[-1]
    if not NAME_RE.match(name):
        raise Reject(ErrorKind.ALLOWLIST, f"file name {name!r} has characters outside [A-Za-z0-9_.+-]")
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
        Reject: with the :class:`ErrorKind` and a reason naming the file.
    """
    if not files:
        raise Reject(ErrorKind.MISSING_FILE, "no files")
    out: dict[str, str] = {}
    for path, content in files.items():
        name = _basename(path)
        if task.place(name) is None:
            raise Reject(
                ErrorKind.ALLOWLIST,
                f"file {name!r} is not allowed for task {task.id!r} (allowed: {_allowed_list(task)})",
            )
        if name in out:
            raise Reject(ErrorKind.ALLOWLIST, f"file {name!r} given twice (as different paths)")
        data = as_bytes(content) if isinstance(content, bytes) else None
        if data is None:
            try:
                data = content.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise Reject(
                    ErrorKind.NOT_UTF8,
                    f"file {name!r} is not valid UTF-8 text (lone surrogate at {exc.start})",
                ) from None
        if len(data) > max_file_bytes:
            raise Reject(
                ErrorKind.FILE_TOO_LARGE, f"file {name!r} has {len(data)} bytes > limit {max_file_bytes}"
            )
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Reject(
                ErrorKind.NOT_UTF8, f"file {name!r} is not valid UTF-8 (byte offset {exc.start})"
            ) from None
        if "\0" in text:
            raise Reject(ErrorKind.NOT_UTF8, f"file {name!r} contains NUL bytes")
        out[name] = text
    if not any(n.endswith(".cpp") for n in out):
        raise Reject(
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
    except Reject as r:
        return files_rejection(method, task, sample_id, r, files, origin, notes)
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
            sha256=text_sha256(response),
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
            sha256=text_sha256(response),
            origin=origin,
            notes=tuple(parsed.notes),
        )
    result = make_candidate(method, task, sample_id, parsed.files, max_file_bytes, origin, parsed.notes)
    if isinstance(result, Rejection):  # hash the raw response: the parse may have dropped parts of it
        result = result.model_copy(update={"sha256": text_sha256(response)})
    return result
