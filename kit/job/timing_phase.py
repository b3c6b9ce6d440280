"""The timing stage and the verification after it, at a :class:`~kit.job.place.TimingPlace` (a build worker that
times its own jobs, or a timing worker): the runners under the node's gate (or the adb device), the native side
interleaved or from a baseline table, then the trials again with other seeds.  The waits for the gate are charged
to the job's ``lock_wait`` phase (:mod:`kit.job.phases`).
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path

from kit.baselines.lookup import NoBaseline
from kit.host.nodelock import NodeLock
from kit.job import phases
from kit.job.place import TimingPlace
from kit.job.record import Job
from kit.results.outcomes import Outcome, StageFailure, TimingOutcome, VerifyOutcome
from kit.results.records import ErrorKind, Status
from kit.stages import timing as stiming
from kit.stages import verify as sverify
from kit.stages.tabletiming import time_against_table
from kit.suite.tasks import Task

__all__ = ["held", "reverify", "setup", "shared", "time_at"]


def setup(place: TimingPlace, scratch: Path, refs: sverify.References | None = None,
           onnx: Path | None = None) -> stiming.TimingSetup:
    """Where the timing stage runs at ``place``: with its runner, in ``scratch``, and in its phases: the runners
    start up under the node's gate held shared and their runs hold it exclusively, all of a stage's batches in
    the node's turn (:meth:`kit.host.nodelock.NodeLock.turn`); on an adb device both phases hold the device
    instead, and the stage its turn on the device (this node's builds go on;
    :class:`kit.devices.session.DeviceSession`).  ``refs``, ``onnx``: references by seed and the task's ONNX
    model where the task's files are not here."""
    device, gate = place.device, place.gate
    if device is not None:
        return stiming.TimingSetup(place.runner, scratch, lambda: phases.waiting(device.hold()),
                                   lambda: phases.waiting(device.prepare()), refs, onnx,
                                   lambda: phases.waiting(device.turn()))
    return stiming.TimingSetup(place.runner, scratch, hold=lambda: phases.waiting(held(gate, exclusive=True)),
                               prepare=lambda: shared(gate), refs=refs, onnx=onnx,
                               turn=lambda: _turn(gate))


def time_at(place: TimingPlace, job: Job, candidate: sverify.SideModel, native: sverify.SideModel | None,
          setup: stiming.TimingSetup, native_error: str) -> TimingOutcome:
    """Stage 3: time ``candidate`` against ``native`` at ``place``, as ``setup`` says (:func:`setup`).  Without
    a native side the outcome says why (``no_native_reason``: ``native_error``).  ``place.baselines``: in table
    mode the native side comes from the table (:func:`_against_table`); else an interleaved timing's native
    measurement goes into it, under ``job``'s id and method.

    Raises:
        StageFailure: as :func:`kit.stages.timing.time_candidate` and :func:`_against_table`."""
    opts, book = place.timing, place.baselines
    if book.table_mode and native is not None:
        return _against_table(place, job.task, candidate, setup)
    tr = stiming.time_candidate(job.task, candidate, native, opts, setup)
    if native is None:
        return replace(tr, no_native_reason=native_error)
    return book.note(job.task, job.job_id, job.method, tr)


def _against_table(place: TimingPlace, task: Task, candidate: sverify.SideModel,
                   setup: stiming.TimingSetup) -> TimingOutcome:
    """Time ``candidate`` alone against the native time of ``place.baselines``' table
    (``baselines.native_timing = "table"``).

    On an adb device (``place.device``) the table is the device's, keyed by the hardware its session read when it
    opened; the timed runs read it again, and a device whose key changed meanwhile (other cores, other maximum
    frequencies) is refused rather than compared with another device's table.

    Raises:
        StageFailure: TIMING_FAILED (``no_baseline``) when no entry matches (the reason named), or the device's
            key changed; as the timing otherwise."""
    book, device = place.baselines, place.device
    opened = device.opened if device is not None else None
    if device is not None and opened is None:
        raise StageFailure(Status.TIMING_FAILED, ErrorKind.NO_BASELINE, f"{device.label}: its session read no "
                           "hardware fingerprint when it opened: time interleaved")
    try:
        entry = book.native_for(task, opened)
    except NoBaseline as exc:
        raise StageFailure(Status.TIMING_FAILED, ErrorKind.NO_BASELINE, str(exc)) from None
    key = book.key_for(opened).key
    out = time_against_table(task, candidate, entry, key, place.timing, setup, book.native_tau(task, opened).log_sd)
    if device is not None and (now := book.key_of(out).key) != key:
        raise StageFailure(Status.TIMING_FAILED, ErrorKind.NO_BASELINE, f"{device.label}: its hardware key changed "
                           f"from {key} (session opened) to {now} (timed runs): cores or their maximum frequencies "
                           "differ; the table of the former does not apply")
    return out


def reverify(place: TimingPlace, job: Job, candidate: sverify.SideModel, scratch: Path, out: Outcome,
              refs: sverify.References | None = None) -> None:
    """Stage 4, once timing has passed: the verification trials (``place.settings.verify``) again with other
    seeds, salted with the candidate's sha256 (:func:`kit.stages.verify.reverify`), with ``place``'s runner under
    its gate held shared (``refs``: references by seed computed elsewhere).  Its trials and seconds are added to
    the verification's in ``out`` (a failure's too, as its ``partial``).

    Raises:
        StageFailure: as :func:`kit.stages.verify.reverify`."""
    salt = sverify.reverify_salt(job.candidate_sha256)
    try:
        with phases.charged("reverify"), shared(place.gate):
            again = sverify.reverify(job.task, candidate, place.runner, scratch / "reverify", place.settings.verify,
                                     salt, refs)
    except StageFailure as f:
        if isinstance(f.partial, VerifyOutcome):
            f.partial = _joined(out.verify, f.partial)
        raise
    out.add(_joined(out.verify, again))


def _joined(first: VerifyOutcome | None, again: VerifyOutcome) -> VerifyOutcome:
    """``first``'s trials then ``again``'s, and the seconds of both (``first`` None: ``again``)."""
    if first is None:
        return again
    return replace(first, trials=first.trials + again.trials,
                   verify_s=None if first.verify_s is None else first.verify_s + (again.verify_s or 0.0))


def shared(gate: NodeLock | None):
    """The node's gate held shared (builds, verification), the wait for it charged to ``lock_wait``."""
    return phases.waiting(held(gate, exclusive=False))


def _turn(gate: NodeLock | None):
    """The node's turn to time (:meth:`NodeLock.turn`), the wait for it charged to ``lock_wait``."""
    return phases.waiting(gate.turn() if gate is not None else contextlib.nullcontext())


def held(gate: NodeLock | None, exclusive: bool):
    if gate is None:
        return contextlib.nullcontext()
    return gate.exclusive() if exclusive else gate.shared()
