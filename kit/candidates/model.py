"""The candidate model: :class:`Candidate`, :class:`Rejection`, their hashes and the shared constants.

The lowest layer of :mod:`kit.candidates`: nothing here parses or checks; ``parse``, ``allowlist`` and
``sources`` build on it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from kit.results.records import ErrorKind
from kit.suite.tasks import Task

NATIVE_METHOD = "native"
NAME_RE = re.compile(r"^[A-Za-z0-9_.+-]+$")
SAMPLE_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


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
    with no native files (see :func:`kit.candidates.native_candidate`).
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
        data = as_bytes(files[name])
        h.update(name.encode("utf-8", "surrogateescape") + b"\0" + str(len(data)).encode() + b"\0")
        h.update(data)
    return h.hexdigest()


def as_bytes(content: str | bytes) -> bytes:
    """``content`` as bytes: bytes unchanged, text as UTF-8 with lone surrogates passed through."""
    if isinstance(content, bytes):
        return content
    return content.encode("utf-8", "surrogatepass")


def text_sha256(text: str) -> str:
    """sha256 (hex) of ``text`` encoded as :func:`as_bytes` does (the hash of a raw response or line)."""
    return hashlib.sha256(as_bytes(text)).hexdigest()
