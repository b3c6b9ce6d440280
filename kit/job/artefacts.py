"""What a build worker hands to a timing worker for one job (:class:`Built`) and what the build half measured
(:class:`BuildHalf`); the files travel as :class:`kit.host.shipping.Bundle` (machine code checked file by file)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kit.host.shipping import Bundle
from kit.results.outcomes import Outcome, Where


@dataclass(frozen=True)
class BuildHalf:
    """What the build half of a job measured (small: the driver keeps it should every timing try be lost):
    where and when it ran, the build and verification outcomes, and its seconds."""

    where: Where
    outcome: Outcome
    wall_s: float


@dataclass(frozen=True)
class Built:
    """What a build worker hands to a timing worker for one job.

    ``half``: what the build half measured; ``libs``: the candidate's machine code: its shared libraries
    (``lib/*.so*``), or for a static build its own runner (``bin/mkb_runner``; none for a converter task, whose
    runtime is the native one);
    ``model``: the task converted by the candidate's converter (.mnn bytes); ``native_model``: the task
    converted by the native converter, or None when native cannot convert it (``native_error`` says why);
    ``native_key``: the native build the candidate must be timed against; ``built_by``: the build worker's name;
    ``references``: seed → ONNX Runtime's outputs (name → array) of that seed's inputs, for the checks the
    timing node makes (the timed runs' outputs, the verification after timing) without the task's ONNX file;
    ``onnx``: that file's bytes, for the references of the timed forwards the runner checked at random (their
    inputs exist only once the candidate has been timed).
    """

    half: BuildHalf
    libs: Bundle
    model: bytes
    native_model: bytes | None
    native_key: str
    built_by: str
    native_error: str = ""
    references: dict[int, dict[str, Any]] = field(default_factory=dict)
    onnx: bytes = b""
