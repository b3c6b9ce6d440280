"""The Ray actors of a run: build workers (:class:`JobActor`) and timing workers (:class:`TimeActor`).

Each actor calls its setup once in its ``__init__`` — by default :func:`kit.job.worker.setup_worker`, which
locks workspace ``w<index>`` on its node for the actor's life, or :func:`kit.job.timing_worker.setup_timing_worker` — and then
runs one job at a time: ``job_fn(job, state)`` (default :func:`kit.job.pipeline.run_job`), the build half
(:func:`kit.job.pipeline.build_job`) when timing runs elsewhere, or ``time_fn(job, built, timer)`` (default
:func:`kit.job.pipeline.time_job`) on a timing node.  An actor's ``name`` is ``n<node id, 8 hex>.w<index>``
(``.t<index>`` for a timing worker); it becomes ``Record.worker`` and the shard name.  A setup that raises
is kept and re-raised by every call, so the driver sees the exception's own type.  Each actor has a second
thread (``max_concurrency=2``) that answers :meth:`Actor.stage` while a job runs.
"""

from __future__ import annotations

import logging
import os
import platform
import socket
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import ray

from kit.dispatch.cluster import kit_digest
from kit.host.machine import cpu_model
from kit.host.shipping import Bundle
from kit.job.artefacts import BuildHalf, Built
from kit.job.pipeline import build_job, run_job, time_job
from kit.job.record import Job
from kit.job.timing_worker import setup_timing_worker
from kit.job.worker import Worker, setup_worker
from kit.mnn.native import native_bundle
from kit.results.records import Record
from kit.run.provenance import Session, TimingNode, collect
from kit.settings.config import EvalConfig

#: ``setup_fn(cfg, index, name) -> state``: runs once per build actor (default: :func:`kit.job.worker.setup_worker`)
SetupFn = Callable[[EvalConfig, int, str], Any]
#: ``job_fn(job, state) -> Record``: runs once per try of a job (default: :func:`kit.job.pipeline.run_job`)
JobFn = Callable[[Job, Any], Record]
#: ``time_fn(job, built, timer) -> Record``: the timing half of a job on a timing worker
#: (default: :func:`kit.job.pipeline.time_job`)
TimeFn = Callable[[Job, Built, Any], Record]

DEFAULT_SETUP: SetupFn = setup_worker
DEFAULT_JOB: JobFn = run_job
DEFAULT_TIME: TimeFn = time_job


class Actor:
    """What both kinds of worker share: where they run, the current stage, closing."""

    cfg: EvalConfig
    name: str
    state: Any
    setup_error: BaseException | None

    def _start(self, cfg: EvalConfig, name: str) -> None:
        # the kit's INFO lines (the native build's progress, ~10 minutes on a fresh cache) to stderr, which Ray
        # forwards to the driver's console as "(JobActor pid=...) ..."; an actor's logger has no handler otherwise
        log = logging.getLogger("kit")
        if not log.handlers:
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("%(message)s"))
            log.addHandler(handler)
            log.setLevel(logging.INFO)
        self.cfg = cfg
        self.kit_digest = kit_digest()  # the sources this process imports from now on
        self.node_id = ray.get_runtime_context().get_node_id()
        self.name = name.format(node=self.node_id[:8])
        self.state = None
        #: the state of the job running now (``state``, or a copy under another config: JobActor.run)
        self.current: Any = None
        self.setup_error = None

    def ready(self) -> dict[str, Any]:
        """Where this worker runs: name, node id, host, node IP, pid, arch.  Raises the setup error."""
        if self.setup_error is not None:
            raise self.setup_error
        return {
            "name": self.name,
            "node_id": self.node_id,
            "host": socket.gethostname(),
            "ip": ray.util.get_node_ip_address(),
            "pid": os.getpid(),
            "arch": platform.machine(),
            "kit_digest": self.kit_digest,
            "native_key": getattr(self.state, "native_key", None),  # Worker and TimingWorker both have one
        }

    def stage(self) -> str:
        """The stage of the job running now ("build", "verify", "time"; "" if none or unknown).  Answered
        while a job runs (the actor has a second thread for it)."""
        return str(getattr(self.current, "stage", "") or "")

    def close(self) -> None:
        """Release the workspace locks (the process exit would release them too)."""
        if hasattr(self.state, "release"):
            self.state.release()


class JobActor(Actor):
    """A build worker: owns ``setup_fn``'s state (a workspace) for its life and runs jobs in it one at a
    time — whole jobs (:meth:`run`), or their build half when timing is elsewhere (:meth:`build`)."""

    def __init__(self, cfg: EvalConfig, index: int, setup_fn: SetupFn, job_fn: JobFn) -> None:
        self._start(cfg, f"n{{node}}.w{index}")
        self.job_fn = job_fn
        self._views: dict[str, Any] = {}  # config digest -> the state under that config (run's cfg)
        try:
            self.state = self.current = setup_fn(cfg, index, self.name)
        except Exception as exc:  # noqa: BLE001 - re-raised by ready()/run() so the driver sees its type
            self.setup_error = exc

    def run(self, job: Job, cfg: EvalConfig | None = None) -> Record:
        """``job_fn(job, state)``; ``cfg``: another config for this job (``mkb serve``'s correctness-only lane:
        the state's dataclass copied with it, ``timing.enabled = false``), None: the actor's."""
        if self.setup_error is not None:
            raise self.setup_error
        state = self.state
        if cfg is not None and (key := cfg.digest()) != self.cfg.digest():
            state = self._views.setdefault(key, replace(state, cfg=cfg))
        self.current = state
        return self.job_fn(job, state)

    def build(self, job: Job) -> tuple[Record | BuildHalf, Built | None]:
        """(record, None) when the job ended here, else (what the build half measured, the artefacts for a
        timing worker); the driver reads the first (small: it keeps the build's outcome should every
        timing try be lost) and hands the second to a timing worker by reference."""
        if self.setup_error is not None:
            raise self.setup_error
        out = build_job(job, self.state)
        return (out, None) if isinstance(out, Record) else (out.half, out)

    def native_bundle(self) -> Bundle:
        """This worker's native baseline (libraries + runner) for timing workers."""
        if self.setup_error is not None:
            raise self.setup_error
        return native_bundle(self.state.native)

    def provenance(self, cfg: EvalConfig | None = None) -> Session:
        """This session's provenance on this worker's node (:func:`kit.run.provenance.collect`) under ``cfg``
        (None: the actor's config)."""
        return collect(cfg or self.cfg, self.state if isinstance(self.state, Worker) else None)


class TimeActor(Actor):
    """A timing worker (one per ``dispatch.timing_resource`` node when ``dispatch.build_resource`` is set):
    installs the shipped native baseline once, then times shipped candidates one at a time."""

    def __init__(self, cfg: EvalConfig, index: int, native_key: str, native: Bundle, time_fn: TimeFn) -> None:
        self._start(cfg, f"n{{node}}.t{index}")
        self.time_fn = time_fn
        try:
            self.state = self.current = setup_timing_worker(cfg, index, self.name, native_key, native)
        except Exception as exc:  # noqa: BLE001 - re-raised by ready() so the driver sees its type
            self.setup_error = exc

    def time(self, job: Job, built: Built) -> Record:
        if self.setup_error is not None:
            raise self.setup_error
        return self.time_fn(job, built, self.state)

    def provenance(self) -> TimingNode:
        """This timing node's name, host, architecture and CPU model."""
        return TimingNode(name=self.name, host=socket.gethostname(), arch=platform.machine(), cpu_model=cpu_model())


def close_actors(actors: list[Any]) -> None:
    """Ask each of ``actors`` (live JobActor handles) to release its workspace and wait for them up to 30 s; best
    effort: ending an actor releases its locks too, which its caller does next."""
    refs = [a.close.remote() for a in actors]
    try:
        ray.wait(refs, num_returns=len(refs), timeout=30)
    except Exception as exc:  # noqa: BLE001 - best effort (docstring)
        logging.getLogger("kit").debug("closing Ray workers: %s", exc)
