"""A finished check as the service returns it: the verdict ``mkb check`` prints for its record
(:func:`kit.outline.evaluate.verdict`), the stage it ended in, its status and its reward (:mod:`kit.serve.reward`)."""

from __future__ import annotations

from typing import Any

from kit.outline.evaluate import verdict
from kit.results.records import Record, Status
from kit.serve.reward import reward

#: statuses that end a job in one stage whatever else the record holds
_ENDS_IN = {Status.REJECTED_INPUT: "screen", Status.COMPILE_ERROR: "build", Status.COMPILE_TIMEOUT: "build",
            Status.TIMING_FAILED: "time"}


def ended_in(rec: Record) -> str:
    """The pipeline stage ``rec``'s job ended in: ``screen`` (refused before any build), ``build``, ``verify``
    (or the verification again after timing: ``time`` once the timing stage ran), ``time``; a harness error or
    lost worker: the last stage that measured something, ``setup`` when none did."""
    if rec.status in _ENDS_IN:
        return _ENDS_IN[rec.status]
    for stage, seconds in (("time", rec.timing_s), ("verify", rec.verify_s), ("verify", rec.convert_s),
                           ("build", rec.build_s)):
        if seconds is not None:
            return stage
    return "setup" if rec.status in (Status.HARNESS_ERROR, Status.WORKER_LOST) else "build"


def finished(rec: Record) -> dict[str, Any]:
    """The fields of a finished check (:class:`kit.serve.models.CheckView`): ``verdict`` (as ``mkb check``),
    ``ended_in``, ``status``, ``reward``."""
    return dict(verdict=verdict(rec), ended_in=ended_in(rec), status=rec.status.value, reward=reward(rec))
