"""``run_job(job, worker) -> Record``: the stages in order, and the one place exceptions become statuses.

register → build → convert + verify → time → verify again (other seeds: the kernel must stay correct over all
its calls), in a workspace the worker owns.  Whatever happens, the
workspace is restored and exactly one :class:`~kit.results.records.Record` comes back.  Each stage returns its own
result (:mod:`kit.results.outcomes`), collected in an :class:`~kit.results.outcomes.Outcome`; :func:`_guarded` turns the
outcome and whatever was raised into the record (through :func:`kit.job.record.job_record`), so a later failure
keeps what earlier stages measured.

When timing runs on other nodes than builds (``dispatch.build_resource``), a job is split in two halves:
:func:`build_job` on the build node (register → build → convert + verify, then the artefacts packed into a
:class:`~kit.job.artefacts.Built`, with the ONNX Runtime references of the timing node's checks) and
:func:`time_job` on a timing node (a :class:`~kit.job.timing_worker.TimingWorker`: time, then verify again).  Both halves go
through the same exception→status mapping.
"""

from __future__ import annotations

import contextlib
import logging
import platform
import socket
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from kit.devices.errors import DeviceError
from kit.host import fstree
from kit.host import machine as hostinfo
from kit.host.shipping import ArtefactError, Bundle, pack, runtime_libs
from kit.job import phases
from kit.job import timing_phase as tphase
from kit.job.artefacts import BuildHalf, Built
from kit.job.options import JobSettings
from kit.job.record import Job, job_record, now_utc, rejected_record
from kit.job.timing_worker import TimingWorker
from kit.job.worker import Worker
from kit.mnn.native import workspace_lib_dir
from kit.results.outcomes import Outcome, StageFailure, Where
from kit.results.records import EdgeSet, ErrorKind, Record, Status
from kit.stages import build as sbuild
from kit.stages import screen
from kit.stages import timing as stiming
from kit.stages import verify as sverify
from kit.suite.inputs import make_inputs
from kit.suite.tasks import Task

__all__ = ["build_job", "rejected_record", "run_job", "time_job"]

log = logging.getLogger("kit")


def _where(worker: Worker) -> Where:
    return Where(arch=platform.machine(), host=socket.gethostname(), worker=worker.name,
                 mnn_version=worker.mnn_version or worker.cfg.mnn.version, build_flags=worker.build_flags,
                 started_at=now_utc(),
                 sandboxed=worker.settings.sandboxed, image_id=worker.image_id)


def _built_on(job: Job, arch: str) -> Job:
    """``job`` with its build mode as the node that built it has it (``arch``: that node's architecture, in
    :func:`kit.host.machine.host_arch` names): the driver made the job with its own host's (an aarch64 build node of
    an x86_64 driver builds natively, :mod:`kit.host.target`)."""
    arch = hostinfo.MACHINE_ALIASES.get(arch.lower(), arch.lower())
    return job if not arch or arch == job.target.host_arch else replace(job, target=replace(job.target, host_arch=arch))


def run_job(job: Job, worker: Worker) -> Record:
    """Evaluate one job in ``worker``'s workspace and return its record (never raises for a candidate's
    failure; a fault of the kit itself becomes a ``harness_error`` record with the traceback)."""
    job = _built_on(job, hostinfo.host_arch())
    rec = _guarded(job, _where(worker), Outcome(), _checked(worker, lambda scratch, out: _stages(job, worker, scratch, out)),
                   worker.scratch)
    assert isinstance(rec, Record)
    return rec


def build_job(job: Job, worker: Worker) -> Record | Built:
    """The build node's half of a job whose timing runs on another node (``dispatch.build_resource``):
    register, build, convert and verify here (this node runs the build's architecture), then pack what
    timing needs (:class:`~kit.job.artefacts.Built`).  Returns the final :class:`Record` instead when the job
    ends here (a failure, or ``timing.enabled = false``).  Never raises for a candidate's failure."""
    job = _built_on(job, hostinfo.host_arch())
    return _guarded(job, _where(worker), Outcome(),
                    _checked(worker, lambda scratch, out: _build_for_shipping(job, worker, scratch, out)), worker.scratch)


def time_job(job: Job, built: Built, timer: TimingWorker) -> Record:
    """The timing node's half: unpack ``built`` into a scratch directory, time it against the shipped
    native baseline, and return the job's record (``worker`` = the build worker, ``timing_worker`` = this
    one; ``wall_s`` = both halves).  Artefacts this node cannot use — machine code of another ELF machine
    than the one it runs (its own, or the target it emulates), another native build — are a ``harness_error`` of
    error kind ``artefact`` naming the file (a cluster fault, not the candidate's: a resumed run times it again)."""
    half = built.half
    job = _built_on(job, half.where.arch)
    where = replace(half.where, timing_worker=timer.name, timing_host=socket.gethostname(),
                    sandboxed=half.where.sandboxed and timer.settings.sandboxed)
    # a copy: the timing result and the timing half's phases go into this job's own outcome
    outcome = replace(half.outcome, phases=dict(half.outcome.phases))
    rec = _guarded(job, where, outcome, lambda scratch, out: _time_shipped(job, built, timer, scratch, out),
                   timer.scratch)
    assert isinstance(rec, Record)
    return rec.model_copy(update={"wall_s": (rec.wall_s or 0.0) + half.wall_s})


#: a job's body: ``body(scratch, outcome)`` fills ``outcome`` stage by stage; returns the artefacts to ship,
#: or None when the job ends here
Body = Callable[[Path, Outcome], "Built | None"]


def _checked(worker: Worker, body: Body) -> Body:
    """``body``, then the workspace checked (:func:`kit.stages.build.check_after_job`) however it ended."""
    def run(scratch: Path, out: Outcome) -> Built | None:
        try:
            return body(scratch, out)
        finally:
            with phases.charged("cleanup"):
                sbuild.check_after_job(worker.workspace, out.flags)
    return run


def _guarded(job: Job, where: Where, outcome: Outcome, body: Body, scratch_root: Path | None = None) -> Record | Built:
    """Run ``body(scratch, outcome)`` and turn its outcome into a record: the one place where exceptions
    become statuses.  ``outcome`` collects stage results as they come, so a later failure keeps them.  The
    scratch is removed however the job ended (:func:`_removed`)."""
    t0 = time.monotonic()
    failure: StageFailure | None = None
    shipped: Built | None = None
    with phases.job_clock(outcome.phases):
        scratch = Path(tempfile.mkdtemp(prefix=f"mkb-{job.job_id[:8]}-", dir=scratch_root))
        try:
            shipped = body(scratch, outcome)
        except StageFailure as f:
            outcome.add(f.partial)
            failure = f
        except DeviceError as exc:  # only timing uses a device: built and verified, its timing failed
            failure = StageFailure(Status.TIMING_FAILED, exc.kind, f"timing device: {exc}")
        except ArtefactError as exc:  # shipped files a timing node cannot use: the cluster's fault
            failure = StageFailure(Status.HARNESS_ERROR, ErrorKind.ARTEFACT, f"shipped artefacts refused: {exc}")
        except Exception as exc:  # noqa: BLE001 - the one place that turns exceptions into statuses
            failure = StageFailure(Status.HARNESS_ERROR, ErrorKind.INTERNAL,
                                   f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-3000:]}")
        except BaseException:
            with contextlib.suppress(OSError):
                fstree.remove(scratch)
            raise
        with phases.charged("cleanup"):
            failure = _removed(scratch, failure)
    if shipped is not None and failure is None:
        return replace(shipped, half=BuildHalf(where, outcome, time.monotonic() - t0))
    return _recorded(job, where, outcome, failure, t0)


def _recorded(job: Job, where: Where, outcome: Outcome, failure: StageFailure | None, t0: float) -> Record:
    """The job's record (:func:`kit.job.record.job_record`), its ``wall_s`` from ``t0`` (``time.monotonic()`` at the
    job's start) to the record, and the record's own assembly in ``phases.record_s``."""
    t1 = time.monotonic()
    rec = job_record(job, where, outcome, failure)
    t2 = time.monotonic()
    update: dict[str, object] = {"wall_s": t2 - t0}
    if rec.phases is not None:
        update["phases"] = rec.phases.model_copy(update={"record_s": round(t2 - t1, 4)})
    return rec.model_copy(update=update)


def _removed(scratch: Path, failure: StageFailure | None) -> StageFailure | None:
    """Remove a job's ``scratch`` (:func:`kit.host.fstree.remove`: the candidate's runs wrote there); returns
    the job's failure: ``failure``, or, where the job had none, RUNTIME_CRASH ``forbidden`` naming the cap its
    scratch crossed (removed anyway), or HARNESS_ERROR ``internal`` when the kit could not remove it (the next
    job gets a scratch of its own either way)."""
    try:
        tally = fstree.remove(scratch)
    except OSError as exc:
        why = f"the kit could not remove the job's scratch {scratch}: {exc}"
        if failure is not None:  # the job's own failure is its record's cause
            log.warning("%s", why)
        return failure or StageFailure(Status.HARNESS_ERROR, ErrorKind.INTERNAL, why)
    if tally.over and failure is None:
        return StageFailure(Status.RUNTIME_CRASH, ErrorKind.FORBIDDEN,
                            f"the job's scratch held {tally.over}: removed")
    return failure


def _build_verify(job: Job, worker: Worker, scratch: Path, out: Outcome) -> sverify.SideModel:
    """Register, build, convert and verify; returns the candidate's model and side (its libraries stay in
    the workspace's build directory until the next build).  The workspace's sources are restored."""
    task, opts = job.task, worker.settings
    ws, build_opts, native = worker.build_place(task)  # a cross target's converter task: the host's half
    out.flags += screen.response_flags(job.notes)
    if job.files is None:
        raise StageFailure(Status.REJECTED_INPUT, job.reject_kind, job.reject_reason)
    try:
        worker.stage = "build"  # checking the workspace and registering the files are part of the build
        places = {n: rel for n in job.files if (rel := task.place(n)) is not None}
        with phases.charged("screen"):
            out.flags += screen.check_sources(job.files, sbuild.originals(ws, task, job.files), places)
        # the workspace is checked after the job, however it ended (_checked): not at the end of this block too
        restored = sbuild.candidate_in(ws, task, job.files, out.flags, check_after=False)
        with phases.exit_charged("cleanup", restored) as swap:
            runner_out = ws.root / "runner" / "mkb_runner" if build_opts.target.static else None
            with phases.charged("build"):
                out.add(sbuild.build(ws, swap, build_opts, hold=lambda: tphase.shared(worker.gate), runner_out=runner_out))
            with phases.charged("screen"):
                for lib in sorted(workspace_lib_dir(ws).iterdir()):
                    screen.check_library(lib, worker.native_symbols.of(native.lib_dir / lib.name))
                if build_opts.target.static:  # an archive linked into the runner: its objects from the candidate
                    screen.check_objects(sbuild.candidate_objects(ws, swap))
            # convert + verify with the candidate's converter and libraries (a static build: its runner)
            worker.stage = "verify"
            with phases.charged("verify"):
                side = worker.candidate_side(task, runner_out)
                with tphase.shared(worker.gate):
                    model, verified = sverify.convert_and_verify(task, side, worker.native.runner, scratch, opts.verify)
                    out.add(verified)  # kept when an edge set's runner fails the job
                    out.add(replace(verified, edge_sets=_edge_sets(worker, task, sverify.SideModel(model, side),
                                                                   scratch)))
        return sverify.SideModel(model, side)
    finally:
        worker.stage = ""


def _edge_sets(worker: Worker, task: Task, candidate: sverify.SideModel, scratch: Path) -> tuple[EdgeSet, ...]:
    """The task's edge sets run on ``candidate`` (:func:`kit.stages.verify.run_edges`), each with native MNN's
    verdict on it beside (:meth:`kit.stages.native.NativeModels.edge_verdicts`; None where native has none)."""
    if not task.edges:
        return ()
    runner = worker.native.runner
    native = worker.native_models.edge_verdicts(task, runner, scratch / "edges-native")
    sets = sverify.run_edges(task, candidate.model, candidate.side, runner, scratch / "edges", worker.settings.verify,
                             frozenset(n for n, ok in native.items() if not ok))
    return tuple(e.model_copy(update={"native_ok": native.get(e.name)}) for e in sets)


def _native_for(worker: Worker, task: Task) -> Path | None:
    with phases.charged("native"), tphase.shared(worker.gate):
        return worker.native_models.model(task)


def _stages(job: Job, worker: Worker, scratch: Path, out: Outcome) -> None:
    """All stages on this node."""
    task = job.task
    candidate = _build_verify(job, worker, scratch, out)
    if not worker.settings.timing_enabled:
        return
    worker.stage = "time"
    try:
        native_model = _native_for(worker, task)
        with phases.charged("native"):
            worker.check_native(native_model)
        native = sverify.SideModel(native_model, worker.native_side) if native_model is not None else None
        with phases.charged("time"):
            out.add(tphase.time_at(worker, job, candidate, native, tphase.setup(worker, scratch / "timing"),
                          worker.native_models.error(task)))
        worker.stage = "verify"
        tphase.reverify(worker, job, candidate, scratch, out)
    finally:
        worker.stage = ""


def _build_for_shipping(job: Job, worker: Worker, scratch: Path, out: Outcome) -> Built | None:
    candidate = _build_verify(job, worker, scratch, out)
    if not worker.settings.timing_enabled:
        return None
    native_model = _native_for(worker, job.task)
    with phases.charged("ship"):
        return _packed(job, worker, candidate, native_model)


def _packed(job: Job, worker: Worker, candidate: sverify.SideModel, native_model: Path | None) -> Built:
    """What the timing node of ``job`` needs, packed (:class:`~kit.job.artefacts.Built`)."""
    return Built(
        half=BuildHalf(Where(), Outcome(), 0.0),  # filled in by _guarded
        libs=_machine_code(worker, candidate.side),
        model=candidate.model.read_bytes(),
        native_model=native_model.read_bytes() if native_model is not None else None,
        native_key=worker.native_key,
        built_by=worker.name,
        native_error=worker.native_models.error(job.task),
        references=_references(job, worker.settings),
        onnx=job.task.onnx_path.read_bytes(),
    )


def _machine_code(worker: Worker, side: sverify.Side) -> Bundle:
    """What a timing node needs of the candidate's build: the shared libraries the runner loads, or a static
    build's own runner (``bin/mkb_runner``; nothing for a converter task, which runs the native runner)."""
    if side.runner is None:
        assert side.lib_dir is not None
        return pack(runtime_libs(worker.native.runner, side.lib_dir))
    return pack({} if side.runner == worker.native.runner else {"bin/mkb_runner": side.runner})


def _references(job: Job, settings: JobSettings) -> dict[int, dict]:
    """ONNX Runtime's outputs for the seeds of the timing node's checks (the timed input sets, the verification
    after timing), by seed: a timing node has no task files."""
    again = sverify.reverify_options(settings.verify, sverify.reverify_salt(job.candidate_sha256))
    seeds = stiming.timed_seeds(settings.timing) + [seed for _, group in again.groups() for seed in group]
    return {seed: dict(sverify.reference(job.task, seed, make_inputs(job.task, seed))) for seed in dict.fromkeys(seeds)}


def _time_shipped(job: Job, built: Built, timer: TimingWorker, scratch: Path, out: Outcome) -> None:
    if built.native_key != timer.native_key:
        raise ArtefactError(
            f"{built.built_by} built against native {built.native_key}, timing worker {timer.name} has {timer.native_key}"
        )
    with phases.charged("ship"):
        # every file checked before any is written: nothing of another machine is run, not even by the emulator
        built.libs.check_machine(timer.target.arch, f"the candidate's machine code from {built.built_by}", timer.how)
        shipped = built.libs.write(scratch / "ship")
        model = scratch / "candidate.mnn"
        model.write_bytes(built.model)
        native = None
        if built.native_model is not None:
            (scratch / "native.mnn").write_bytes(built.native_model)
            native = sverify.SideModel(scratch / "native.mnn", sverify.Side(None, _dir_or_none(timer.lib_dir)))
        onnx = scratch / "task.onnx"
        onnx.write_bytes(built.onnx)
    timer.stage = "time"
    own_runner = shipped / "bin" / "mkb_runner"  # a static build's: its engine linked in
    candidate = sverify.SideModel(model, sverify.Side(None, _dir_or_none(shipped / "lib"),
                                                      runner=own_runner if own_runner.is_file() else None))
    try:
        with phases.charged("native"):
            timer.check_native(None)
        setup = tphase.setup(timer, scratch / "timing", built.references, onnx)
        with phases.charged("time"):
            out.add(tphase.time_at(timer, job, candidate, native, setup, built.native_error))
        timer.stage = "verify"
        tphase.reverify(timer, job, candidate, scratch, out, built.references)
    finally:
        timer.stage = ""


def _dir_or_none(path: Path) -> Path | None:
    """``path`` if it is a directory (a static build ships no ``lib/``), else None."""
    return path if path.is_dir() else None
