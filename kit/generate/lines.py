"""The files ``mkb generate`` writes: the answers (a JSONL candidate source) and the requests that got none.

An answer line is what :mod:`kit.candidates.sources` reads (``task_id``, ``sample_id``, ``response``) plus one
``generation`` object saying how it was made (model, endpoint host, sampling settings, the prompt's sha256,
finish reason, tokens, latency, attempts); the source reader takes ``generation`` as metadata, not as a
response part it ignored.  Lines are appended one ``write`` each and flushed, so a run killed midway leaves
whole lines and at most one cut-off last line, which the next run drops before it appends (it is asked again).
A rerun skips the ``(task_id, sample_id)`` pairs the file already has: nothing is asked twice, nothing lost.

The errors file (``<answers>.errors.jsonl``) lists the requests of the latest run that got no answer (rate
limits, server errors, timeouts past the retries); it is rewritten by every run, whose answers file then holds
those samples once they are answered.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict


class GenerateError(Exception):
    """A file of ``mkb generate`` is unreadable or damaged (the message names the file and line), or a setting
    it needs is missing (the message names it)."""


class Generation(BaseModel):
    """How one answer was made.  Tokens as the server counted them (0: not reported); ``latency_s`` from the
    first attempt to the answer; ``attempts`` HTTP requests made."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    endpoint_host: str
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    prompt_sha256: str
    finish_reason: str
    refusal: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    attempts: int = 1


class AnswerLine(BaseModel):
    """One line of the answers file: a candidate source's line with its :class:`Generation`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_id: str
    sample_id: str
    response: str
    generation: Generation


class FailedLine(BaseModel):
    """One request of the latest run that got no answer: ``kind`` (:mod:`kit.generate.client`'s kinds),
    ``message`` (bounded, the API key masked)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_id: str
    sample_id: str
    kind: str
    message: str
    attempts: int
    latency_s: float
    model: str
    endpoint_host: str
    prompt_sha256: str


def errors_path(answers: Path) -> Path:
    """The errors file beside ``answers``."""
    return answers.with_name(answers.name.removesuffix(".jsonl") + ".errors.jsonl")


def answered(path: Path) -> set[tuple[str, str]]:
    """The ``(task_id, sample_id)`` pairs ``path`` holds (none when it does not exist).  A last line cut off
    by a killed run (no newline, not JSON) is removed from the file.

    Raises:
        GenerateError: a whole line that is not an answer line (names the file and line), or a pair twice."""
    return {(line.task_id, line.sample_id) for line in read_answers(path)}


def read_answers(path: Path) -> list[AnswerLine]:
    """The lines of the answers file ``path`` (none when it does not exist), a cut-off last line removed from
    the file first.

    Raises:
        GenerateError: a whole line that is not an answer line (names the file and line), or a pair twice."""
    if not path.exists():
        return []
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        with path.open("r+b") as f:
            f.truncate(cut)
        data = data[:cut]
    seen: set[tuple[str, str]] = set()
    lines: list[AnswerLine] = []
    for n, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            line = AnswerLine.model_validate_json(raw)
        except ValueError as exc:
            first = str(exc).splitlines()[0]
            raise GenerateError(f"{path}:{n}: not an answer line of mkb generate ({first})") from None
        key = (line.task_id, line.sample_id)
        if key in seen:
            raise GenerateError(f"{path}:{n}: {key} appears twice")
        seen.add(key)
        lines.append(line)
    return lines


class Appender:
    """Appends lines to one JSONL file, each by one ``write`` of the whole line, flushed to disk."""

    def __init__(self, path: Path, truncate: bool = False):
        path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if truncate else os.O_APPEND)
        self.path = path
        self._fd = os.open(path, flags, 0o644)

    def add(self, line: BaseModel) -> None:
        data = memoryview((json.dumps(line.model_dump(mode="json"), ensure_ascii=False) + "\n").encode())
        while data:  # a regular file takes a write whole; the loop is for a short write all the same
            data = data[os.write(self._fd, data):]
        os.fsync(self._fd)

    def close(self) -> None:
        os.close(self._fd)
