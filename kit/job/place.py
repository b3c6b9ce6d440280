"""A place that times: what the timing stage and the verification after it need of the worker that runs them
(:class:`TimingPlace`).

Two kinds of worker are one: a build worker that also times, on its own node or on its adb device
(:class:`kit.job.worker.Worker`), and a timing worker on another node than the builds
(:class:`kit.job.timing_worker.TimingWorker`).  :mod:`kit.job.pipeline` times and verifies again through this
surface alone, whichever it has.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # the protocol's annotations only: importing it loads nothing of the stages
    from pathlib import Path

    from kit.baselines.book import Book
    from kit.devices.session import DeviceSession
    from kit.host.nodelock import NodeLock
    from kit.job.options import JobSettings
    from kit.stages.timing import TimingOptions


class TimingPlace(Protocol):
    """What a worker that times offers the timing stage and the verification after it (every member read-only
    here)."""

    @property
    def settings(self) -> JobSettings:
        """The stages' options (the verification after timing takes ``settings.verify``)."""
        ...

    @property
    def timing(self) -> TimingOptions:
        """The timing options, pinned to the cores the runs use (this node's timing cores, or the device's)."""
        ...

    @property
    def runner(self) -> Path:
        """The kit's runner of the native build (a path): it runs every side without a runner of its own."""
        ...

    @property
    def gate(self) -> NodeLock | None:
        """The node's lock: start-ups and verification hold it shared, timed runs exclusively (None: no
        exclusivity)."""
        ...

    @property
    def baselines(self) -> Book:
        """The baseline tables of the native build it times against: in table mode the native side comes from
        them; else each interleaved timing's native measurement goes into them."""
        ...

    @property
    def device(self) -> DeviceSession | None:
        """The adb device that times its jobs (None: this node times, under :attr:`gate`)."""
        ...
