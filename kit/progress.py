"""The live progress bar of a run (rich): label, bar, done/total, elapsed, ETA and a status text.

Shown when stderr is a terminal (or ``MKB_PROGRESS=1``); silent in logs and CI.
"""

from __future__ import annotations

import os
import sys

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def job_progress() -> Progress:
    """A :class:`rich.progress.Progress`; add a task with a ``status`` field: ``add_task(label, total=n, status="")``."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[status]}"),
        disable=not sys.stderr.isatty() and os.environ.get("MKB_PROGRESS") != "1",
    )
