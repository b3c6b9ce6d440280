"""Evaluation stages.  A stage signals a candidate's failure by raising :class:`StageFailure`; only
``kit.pipeline`` turns it (and every other exception) into a record's status."""

from __future__ import annotations

from typing import Any

from kit.records import ErrorKind, Status


class StageFailure(Exception):
    """The candidate failed a stage.

    ``fields`` are extra record fields gathered before the failure (trials, diagnostics, signal, ...).
    """

    def __init__(self, status: Status, kind: ErrorKind, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.fields = fields
