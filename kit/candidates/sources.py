"""Candidate sources (:class:`kit.settings.config.CandidateSource`) read into candidates, and the native candidate.

- a directory ``<path>/<task_id>/<sample_id>/<files>``;
- a JSONL file whose lines are ``{"task_id", "sample_id", "response": "<raw LLM text>"}`` or
  ``{"task_id", "sample_id", "files": {"CPUArgMax.cpp": "..."}}``.

:func:`load_candidates` never raises for bad candidate *content*: every bad candidate becomes a
:class:`Rejection` (the pipeline turns it into a ``rejected_input`` record).  It raises
:class:`CandidateSourceError` only for harness-level problems (missing source, a JSONL line that is not a
JSON object or has no usable ``task_id``/``sample_id``, the same ``(task_id, sample_id)`` twice).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from kit.candidates.allowlist import Reject, candidate_from_response, files_rejection, make_candidate
from kit.candidates.model import (
    NATIVE_METHOD,
    SAMPLE_ID_RE,
    Candidate,
    CandidateOrRejection,
    CandidateSourceError,
    Rejection,
    files_sha256,
    text_sha256,
)
from kit.results.records import ErrorKind
from kit.settings.config import CandidateSource
from kit.suite.tasks import Task

#: the key of a JSONL line that says how its answer was made (``mkb generate``): metadata, not an ignored part
GENERATION_KEY = "generation"

# the package's logger, as before the split into modules: log filters that name "kit.candidates" still match
log = logging.getLogger("kit.candidates")


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
    problem: Reject | None = None
    for entry in sorted(sample_dir.iterdir()):
        if entry.name.startswith("."):
            notes.append(f"hidden entry {entry.name!r} ignored")
            continue
        if entry.is_symlink():
            problem = problem or Reject(ErrorKind.ALLOWLIST, f"{entry.name!r} is a symbolic link (refused)")
            continue
        if not entry.is_file():
            problem = problem or Reject(
                ErrorKind.ALLOWLIST, f"{entry.name!r} is not a regular file (subdirectories are refused)"
            )
            continue
        size = entry.stat().st_size
        if size > max_file_bytes:
            problem = problem or Reject(
                ErrorKind.FILE_TOO_LARGE, f"file {entry.name!r} has {size} bytes > limit {max_file_bytes}"
            )
            continue
        files[entry.name] = entry.read_bytes()
    if problem is not None:
        return files_rejection(method, task, sid, problem, files, origin, notes)
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


@dataclass
class _Reading:
    """One JSONL source being read: what a line is checked against and what the lines gave so far (candidates
    and rejections in ``out``, task ids no task has in ``unknown``)."""

    source: CandidateSource
    tasks: Mapping[str, Task]
    max_file_bytes: int
    ignore_ids: frozenset[str]
    out: list[CandidateOrRejection] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)


def _load_jsonl(
    source: CandidateSource, tasks: Mapping[str, Task], max_file_bytes: int, ignore_ids: frozenset[str]
) -> tuple[list[CandidateOrRejection], list[str]]:
    reading = _Reading(source, tasks, max_file_bytes, ignore_ids)
    out, unknown = reading.out, reading.unknown
    errors: list[str] = []
    raw = source.path.read_bytes()
    for lineno, line_bytes in enumerate(raw.split(b"\n"), start=1):
        try:
            _jsonl_line(reading, lineno, line_bytes)
        except CandidateSourceError as exc:  # report every bad line at once, not one per run
            errors.append(str(exc))
    if errors:
        more = f"\n  ... and {len(errors) - 20} more" if len(errors) > 20 else ""
        raise CandidateSourceError(
            f"{source.path}: {len(errors)} invalid line(s):\n  " + "\n  ".join(errors[:20]) + more
        )
    return out, unknown


def _jsonl_line(reading: _Reading, lineno: int, line_bytes: bytes) -> None:
    """Parse line ``lineno`` of ``reading``'s source into its ``out`` (a candidate or a rejection); raise for a
    malformed line."""
    r = reading
    source, tasks, max_file_bytes, ignore_ids, out, unknown = (r.source, r.tasks, r.max_file_bytes, r.ignore_ids,
                                                                r.out, r.unknown)
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
        raw_sha = text_sha256(line)
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

    extra = sorted(set(obj) - {"task_id", "sample_id", "response", "files", GENERATION_KEY})
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
