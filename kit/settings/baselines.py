"""The ``[baselines]`` section: the baseline tables of native op times per hardware (:mod:`kit.baselines`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from kit.settings.base import Section


class BaselinesSection(Section):
    """Where a speedup's native time comes from, and whether timed jobs add to the baseline table."""

    #: ``interleaved``: native and candidate run in the same timing phase, interleaved in rounds (the kit's
    #: method, docs/scoring.md); ``table``: only the candidate is timed, and divided into the native time the
    #: baseline table of this hardware, MNN version, build flags and runner settings holds for the task (a job
    #: whose task has no matching entry is ``timing_failed``, ``no_baseline``, naming why).  Part of the config
    #: digest: a run directory never mixes the two
    native_timing: Literal["interleaved", "table"] = "interleaved"
    #: every interleaved timing adds its native measurement to the table of the node that timed it
    record: bool = True
    #: the tables' folder; None: ``<mnn.cache_dir>/baselines``
    dir: Path | None = None

    def digest_payload(self) -> dict[str, str] | None:
        """What of this section changes a job's result (None for interleaved timing: digests stay as before)."""
        return {"native_timing": self.native_timing} if self.native_timing != "interleaved" else None
