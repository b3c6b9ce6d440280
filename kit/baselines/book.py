"""A worker's use of the baseline tables: the key of the node (or device) it times on, the lookup of a task's
native time in table mode, and the entry every interleaved timing adds.

A failed write never fails the job: the record stands without it, and the log says why.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from kit.baselines.drift import between_run
from kit.baselines.key import BaselineKey, RunnerSettings, device_hardware, host_hardware, task_sha256
from kit.baselines.lookup import NoBaseline, find
from kit.baselines.table import Entry, TableError, add_entry, read_table, table_path
from kit.results.outcomes import TimingOutcome
from kit.results.records import DeviceState
from kit.score.betweenrun import Tau, default_tau, from_calibration
from kit.suite.tasks import Task

log = logging.getLogger("kit")


@dataclass
class Book:
    """The baseline tables under ``root`` as one worker uses them: ``native_timing`` (``interleaved`` or
    ``table``, ``baselines.native_timing``), ``record`` (add interleaved measurements), the key's parts other
    than the hardware (``mnn_version``, ``native_key``, ``settings``), ``source`` (the run directory, kept in
    each entry) and ``hardware``, the function that reads this node's fingerprint."""

    root: Path
    native_timing: str
    record: bool
    mnn_version: str
    native_key: str
    settings: RunnerSettings
    source: str = ""
    hardware: Callable[[], dict[str, Any]] = field(default=host_hardware)
    _taus: dict[str, dict] = field(default_factory=dict, repr=False, compare=False)

    @property
    def table_mode(self) -> bool:
        return self.native_timing == "table"

    @cached_property
    def host_key(self) -> BaselineKey:
        """The key of the tables of this node (its hardware read once)."""
        return self._key(self.hardware())

    def _key(self, hardware: dict[str, Any]) -> BaselineKey:
        return BaselineKey(hardware, self.mnn_version, self.native_key, self.settings)

    def key_of(self, timing: TimingOutcome) -> BaselineKey:
        """The key of the hardware that took ``timing``: its adb device's, else this node's."""
        return self.key_for(timing.device)

    def key_for(self, device: DeviceState | None = None) -> BaselineKey:
        """The key of the tables of an adb ``device`` (its state: :func:`kit.baselines.key.device_hardware`),
        else of this node."""
        return self._key(device_hardware(device)) if device is not None else self.host_key

    def native_for(self, task: Task, device: DeviceState | None = None) -> Entry:
        """The table's newest entry for ``task`` on this node's key, or on that of the adb ``device`` (its state
        as its session read it when it opened).

        Raises:
            kit.baselines.lookup.NoBaseline: none matches (the reason named), or the table is damaged."""
        try:
            return find(self.root, self.key_for(device), task.id, task_sha256(task))
        except TableError as exc:
            raise NoBaseline(f"task {task.id}: {exc}") from None

    def native_tau(self, task: Task, device: DeviceState | None = None) -> Tau:
        """The between-run sd (ln) of ``task``'s native op time in the table of this node (or of ``device``):
        :func:`kit.baselines.drift.between_run` (its own figure with enough runs, else the table's pooled one),
        else :data:`kit.score.betweenrun.DEFAULT_LOG_SD`.  Read once per key and worker."""
        key = self.key_for(device).key
        if key not in self._taus:
            try:
                self._taus[key] = between_run(read_table(table_path(self.root, key)))
            except TableError:
                self._taus[key] = {"pooled": None, "tasks": {}}
        found = from_calibration({"between_run": self._taus[key]}, task.id, f"baseline table {key[:12]}")
        return found or default_tau("the baseline table has no task measured by 2 runs")

    def note(self, task: Task, job_id: str, method: str, timing: TimingOutcome) -> TimingOutcome:
        """``timing`` with the key of the hardware that took it; an interleaved timing's native measurement is
        added to that table first (when ``record``; a failed write is logged, never raised)."""
        key = self.key_of(timing)
        profile = timing.native_profile
        if self.record and timing.native_timing == "interleaved" and profile is not None:
            try:
                add_entry(self.root, key, Entry(
                    task_id=task.id, task_sha256=task_sha256(task), native_ms=_geomean(profile.op_round_ms),
                    native_model_ms=_geomean(profile.model_round_ms), native_round_ms=list(profile.op_round_ms),
                    native_model_round_ms=list(profile.model_round_ms), native_op_types=dict(profile.op_types),
                    rounds=len(profile.op_round_ms), recorded_at=datetime.now(UTC).isoformat(timespec="microseconds"),
                    source=self.source, job_id=job_id, method=method))
            except (OSError, TableError) as exc:
                log.warning("baseline table %s: the native time of %s was not added: %s", key.key, task.id, exc)
        return replace(timing, baseline_key=key.key)

    def describe(self) -> dict[str, Any]:
        """This node's table for provenance: :meth:`kit.baselines.key.BaselineKey.describe`, ``native_timing``,
        ``record`` and the table's ``dir``."""
        return self.host_key.describe() | {"native_timing": self.native_timing, "record": self.record,
                                           "dir": str(self.root)}


def _geomean(values: tuple[float, ...]) -> float:
    """exp(mean(ln values)), 0.0 for no values or a value <= 0 (op types that took no time)."""
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values and min(values) > 0 else 0.0
