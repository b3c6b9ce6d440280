"""Spread an evaluation over local cores or a Ray cluster (``dispatch.mode = "processes" | "ray"``).

The only module that imports Ray.

* **Cluster.** ``mode = "ray"`` with ``dispatch.address`` unset, and ``mode = "processes"`` always, start an
  embedded Ray instance on this host (``ray.init(address="local")``: no cluster to start, stopped at the
  end); ``mode = "ray"`` with an address (``auto``, ``host:6379``, ``ray://head:10001``) joins that cluster
  (``ray://`` goes through Ray Client, which needs ``ray[client]``: the kit's ``client`` extra).
  If Ray is already initialised in this process, that connection is used and left open.
* **Workers.** ``min(dispatch.workers, CPUs)`` Ray actors (one CPU each; CPUs counted on the nodes that
  carry ``dispatch.timing_resource`` when it is set, and the actors then request ``0.01`` of that custom
  resource so they are placed only there).  Each actor calls ``setup_fn(cfg, index, name)`` once in its
  ``__init__`` — by default :func:`kit.evaluate.setup_worker`, which locks workspace ``w<index>`` on its node
  for the actor's life — and then runs ``job_fn(job, state)`` per job (default :func:`kit.pipeline.run_job`).
  ``name`` is ``n<node id, 8 hex>.w<index>``; it becomes ``Record.worker`` and the shard name.
* **Build and timing nodes apart** (``dispatch.build_resource`` set): the actors above run on the nodes
  that carry ``build_resource`` and do only the build half of a job (:func:`kit.pipeline.build_job`:
  register, build, convert, verify — on the node that built it, i.e. where the build's architecture
  runs).  Its artefacts (the candidate libraries the runner loads, candidate model, native model: ~4.4 MB
  for MNN on x86_64) go
  back as a second return value that stays in Ray's object store; the driver hands that reference to
  one of the timing actors, one per node carrying ``timing_resource`` (pinned by node affinity, named
  ``n<node>.t<index>``), which times it (:func:`kit.pipeline.time_job`).  Timing actors receive the
  native baseline (libraries + runner) from a build actor once at start, so a timing node needs no
  compiler and no MNN source; its architecture is checked against the ELF headers of what it receives
  (:mod:`kit.artefacts`), and every build actor must have built the same native baseline.  A build
  actor stops taking jobs while ``2 x timing actors`` artefacts wait.  A timing actor that dies, or
  artefacts lost with their node, send the job back to be built again (counted as a try); after the
  last try the job's record keeps the build's results (:func:`timing_lost_record`).  With
  ``timing.enabled = false`` no timing actor starts and build actors write the final records.
* **Progress.** The live display counts jobs running / passed / failed per stage (build, verify, time);
  busy actors report their stage through a second actor thread (:meth:`_Actor.stage`).
* **Timing exclusivity** is not scheduled here: :class:`kit.gate.NodeGate` (a file lock in the node's cache
  directory) lets one timing phase run per node with nothing building beside it, whichever actor holds it
  (running builds are paused for the phase, not waited for).
* **Records.** The driver receives each :class:`~kit.records.Record` as it completes (``ray.wait``) and
  appends it to the shard of the actor that produced it (:class:`kit.shards.ShardWriter`, one file per
  record), so only the driver writes files and a killed driver loses only the jobs in flight.  Rerunning
  the same command skips every job already in the shards (:func:`kit.shards.done_job_ids`).
* **Faults.** If an actor dies during a job (``RayActorError``), a new actor takes its slot and the job is
  retried, up to ``dispatch.max_retries`` times; then the job gets a ``worker_lost`` record.  If ``job_fn``
  raises, the job gets a ``harness_error`` record.  Either way every job yields exactly one record, with
  ``Record.attempts`` = number of tries.  A failing ``setup_fn`` aborts the run with its own exception
  (the one the worker raised, not Ray's wrapper around it, whose message carries the remote traceback).
* **Remote nodes** need the same ``kit`` installed (checked: :func:`kit_digest` of driver and each worker
  must match, else :class:`DispatchError`), the task suite at ``tasks.dir`` and the MNN source at
  ``mnn.source_dir`` (or network access for the tarball) at the same paths; ``mnn.cache_dir`` is per node.
  Candidate files travel inside the jobs.  Tasks are small (~1 KB pickled), so each job carries its task.

``mode = "processes"`` is the embedded local Ray: the same code path as ``ray`` without an address.
"""

from __future__ import annotations

import collections
import hashlib
import importlib.util
import logging
import os
import platform
import re
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import ActorUnschedulableError, ObjectLostError, RayActorError, RayTaskError

from kit import provenance
from kit.artefacts import Built, Bundle
from kit.config import EvalConfig
from kit.jobqueue import JobQueue
from kit.pipeline import Job, job_fields
from kit.progress import StageTally, job_progress
from kit.records import ErrorKind, Record, Status
from kit.tasks import Task

log = logging.getLogger("kit")

#: ``setup_fn(cfg, index, name) -> state``: runs once per actor (default: :func:`default_setup`)
SetupFn = Callable[[EvalConfig, int, str], Any]
#: ``job_fn(job, state) -> Record``: runs once per try of a job (default: :func:`kit.pipeline.run_job`)
JobFn = Callable[[Job, Any], Record]

#: ``time_fn(job, built, timer) -> Record``: the timing half of a job on a timing worker (default: :func:`default_time`)
TimeFn = Callable[[Job, Built, Any], Record]

#: fraction of ``dispatch.timing_resource`` each actor requests (only placement, never a limit)
RESOURCE_FRACTION = 0.01
#: seconds between progress refreshes while no result arrives
POLL_S = 0.5


class DispatchError(Exception):
    """The cluster cannot run the evaluation: no node carries ``dispatch.timing_resource``, a worker runs
    other kit sources than the driver, or every worker slot died repeatedly during setup.  The message
    names the config field or the node."""


def kit_digest() -> str:
    """sha256 (hex, 16 chars) of the ``kit`` package's Python sources as they are on disk now (read at
    the start of a run by the driver and at the start of each worker).

    Driver and workers must run the same kit: a node with another version (or a source tree edited
    during a run) would unpickle jobs into different classes.
    """
    import kit

    root = Path(kit.__file__).parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def default_setup(cfg: EvalConfig, index: int, name: str) -> Any:
    """:func:`kit.evaluate.setup_worker` for workspace ``w<index>`` under worker name ``name``."""
    from kit.evaluate import setup_worker

    return setup_worker(cfg, index=index, name=name)


def default_job(job: Job, state: Any) -> Record:
    """:func:`kit.pipeline.run_job` (``state`` is the :class:`~kit.pipeline.Worker` of :func:`default_setup`)."""
    from kit.pipeline import run_job

    return run_job(job, state)


def default_time(job: Job, built: Built, timer: Any) -> Record:
    """:func:`kit.pipeline.time_job`."""
    from kit.pipeline import time_job

    return time_job(job, built, timer)


class _Actor:
    """What both kinds of worker share: where they run, the current stage, closing."""

    cfg: EvalConfig
    name: str
    state: Any
    setup_error: BaseException | None

    def _start(self, cfg: EvalConfig, name: str) -> None:
        self.cfg = cfg
        self.kit_digest = kit_digest()  # the sources this process imports from now on
        self.node_id = ray.get_runtime_context().get_node_id()
        self.name = name.format(node=self.node_id[:8])
        self.state = None
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
            "native_key": getattr(self.state, "native_key", None),  # Worker and Timer both have one
        }

    def stage(self) -> str:
        """The stage of the job running now ("build", "verify", "time"; "" if none or unknown).  Answered
        while a job runs (the actor has a second thread for it)."""
        return str(getattr(self.state, "stage", "") or "")

    def close(self) -> None:
        """Release the workspace lock (the process exit would release it too)."""
        ws = getattr(self.state, "workspace", None)
        if ws is not None and hasattr(ws, "release"):
            ws.release()


class _JobActor(_Actor):
    """A build worker: owns ``setup_fn``'s state (a workspace) for its life and runs jobs in it one at a
    time — whole jobs (:meth:`run`), or their build half when timing is elsewhere (:meth:`build`)."""

    def __init__(self, cfg: EvalConfig, index: int, setup_fn: SetupFn, job_fn: JobFn) -> None:
        self._start(cfg, f"n{{node}}.w{index}")
        self.job_fn = job_fn
        try:
            self.state = setup_fn(cfg, index, self.name)
        except Exception as exc:  # noqa: BLE001 - re-raised by ready()/run() so the driver sees its type
            self.setup_error = exc

    def run(self, job: Job) -> Record:
        if self.setup_error is not None:
            raise self.setup_error
        return self.job_fn(job, self.state)

    def build(self, job: Job) -> tuple[Record | dict[str, Any], Built | None]:
        """(record, None) when the job ended here, else (the record fields so far, the artefacts for a
        timing worker); the driver reads the first (small: it keeps the build's outcome should every
        timing try be lost) and hands the second to a timing worker by reference."""
        from kit.pipeline import build_job

        if self.setup_error is not None:
            raise self.setup_error
        out = build_job(job, self.state)
        return (out, None) if isinstance(out, Record) else (out.fields, out)

    def native_bundle(self) -> Bundle:
        """This worker's native baseline (libraries + runner) for timing workers."""
        from kit.mnn.native import native_bundle

        if self.setup_error is not None:
            raise self.setup_error
        return native_bundle(self.state.native)

    def provenance(self) -> dict[str, Any]:
        from kit.pipeline import Worker
        from kit.provenance import collect

        return collect(self.cfg, self.state if isinstance(self.state, Worker) else None)


class _TimeActor(_Actor):
    """A timing worker (one per ``dispatch.timing_resource`` node when ``dispatch.build_resource`` is set):
    installs the shipped native baseline once, then times shipped candidates one at a time."""

    def __init__(self, cfg: EvalConfig, index: int, native_key: str, native: Bundle, time_fn: TimeFn) -> None:
        from kit.evaluate import setup_timer

        self._start(cfg, f"n{{node}}.t{index}")
        self.time_fn = time_fn
        try:
            self.state = setup_timer(cfg, index, self.name, native_key, native)
        except Exception as exc:  # noqa: BLE001 - re-raised by ready() so the driver sees its type
            self.setup_error = exc

    def time(self, job: Job, built: Built) -> Record:
        if self.setup_error is not None:
            raise self.setup_error
        return self.time_fn(job, built, self.state)

    def provenance(self) -> dict[str, Any]:
        from kit.provenance import cpu_model

        return {"name": self.name, "host": socket.gethostname(), "arch": platform.machine(), "cpu_model": cpu_model()}


def connect(cfg: EvalConfig) -> bool:
    """Initialise Ray for ``cfg.dispatch``; True if this call started it (then :func:`ray.shutdown` it)."""
    if ray.is_initialized():
        return False
    d = cfg.dispatch
    if d.mode == "processes" or d.address is None:
        # no dashboard; no idle task workers prestarted (the kit runs actors only; each idle worker costs
        # ~1.5 % of a core, measured on 2 cores, that a timed job would otherwise share)
        ray.init(address="local", include_dashboard=False, _system_config={"prestart_worker_first_driver": False})
    else:
        if d.address.startswith("ray://") and _ray_client_missing():
            raise DispatchError(
                f"dispatch.address: {d.address!r} joins through Ray Client, which needs the package ray[client] "
                f"(grpcio): install the kit's `client` extra (pip install -e '.[client]', or "
                f"pip install 'ray[client]=={ray.__version__}'), or give the head's GCS address HOST:6379 instead"
            )
        _check_reachable(d.address)
        try:
            ray.init(address=d.address)
        except (ConnectionError, ValueError) as exc:
            raise DispatchError(f"dispatch.address: cannot join the cluster at {d.address!r}: {exc}") from exc
    return True


#: seconds to wait for a TCP connection to the head named by dispatch.address
CONNECT_CHECK_S = 10.0


def _ray_client_missing() -> bool:
    """Whether what ``ray[client]`` adds to ``ray`` (grpcio) is missing here: ``ray://`` addresses need it."""
    return importlib.util.find_spec("grpc") is None


def _check_reachable(address: str) -> None:
    """Raise :class:`DispatchError` when ``HOST:PORT`` (or ``ray://HOST:PORT``) takes no TCP connection within
    :data:`CONNECT_CHECK_S` (``ray.init`` would retry for minutes).  ``auto`` is left to Ray."""
    if address == "auto":
        return
    client = address.startswith("ray://")
    host, _, port = address.removeprefix("ray://").rpartition(":")
    host = host.removeprefix("[").removesuffix("]")  # [IPv6]:PORT
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_CHECK_S).close()
    except OSError as exc:
        start = f"--ray-client-server-port {port}" if client else f"--port {port}"
        raise DispatchError(f"dispatch.address: nothing answers at {address} ({exc}); is the Ray head running "
                            f"there (`ray start --head {start}`)?") from exc


def _labelled(nodes: list[dict], resource: str | None, field_name: str) -> list[dict]:
    """The nodes that carry ``resource`` (all of ``nodes`` when it is None).

    Raises:
        DispatchError: no node carries it (names ``dispatch.<field_name>`` and the resources there are).
    """
    if resource is None:
        return nodes
    labelled = [n for n in nodes if n["Resources"].get(resource, 0) > 0]
    if not labelled:
        have = sorted({k for n in nodes for k in n["Resources"] if not k.startswith("node:")})
        raise DispatchError(
            f"dispatch.{field_name}: no node of the cluster carries resource {resource!r} (resources: {have})"
        )
    return labelled


def _alive_nodes() -> list[dict]:
    return [n for n in ray.nodes() if n.get("Alive")]


def worker_count(cfg: EvalConfig) -> int:
    """``dispatch.workers`` capped by the CPUs of the alive nodes that carry ``dispatch.build_resource``,
    or (when that is None) ``dispatch.timing_resource``.

    Raises:
        DispatchError: no alive node carries the resource(s) or has a CPU.
    """
    d = cfg.dispatch
    nodes = _alive_nodes()
    if d.build_resource is not None:
        timer_nodes(cfg)  # raises when timing needs a label no node carries
        nodes = _labelled(nodes, d.build_resource, "build_resource")
    else:
        nodes = _labelled(nodes, d.timing_resource, "timing_resource")
    cpus = int(sum(n["Resources"].get("CPU", 0) for n in nodes))
    if cpus < 1:
        raise DispatchError("dispatch: the cluster's nodes report no CPU")
    return max(1, min(d.workers, cpus))


def timer_nodes(cfg: EvalConfig) -> list[str]:
    """The nodes that get a timing worker: :func:`timing_nodes` when build and timing nodes are apart and
    timing is on, else none."""
    return timing_nodes(cfg) if cfg.dispatch.build_resource is not None and cfg.timing.enabled else []


def timing_nodes(cfg: EvalConfig) -> list[str]:
    """Node ids of the alive nodes that carry ``dispatch.timing_resource`` (one timing worker each).

    Raises:
        DispatchError: none does.
    """
    return sorted(n["NodeID"] for n in _labelled(_alive_nodes(), cfg.dispatch.timing_resource, "timing_resource"))


def lost_record(job: Job, attempts: int, status: Status, message: str, worker: str = "", started_at: str = "") -> Record:
    """The record of a job that produced none itself (``worker_lost`` or ``harness_error``)."""
    return Record(
        **job_fields(job),
        status=status,
        error_kind=ErrorKind.INTERNAL,
        error_message=message[:4000],
        worker=worker,
        attempts=attempts,
        started_at=started_at,
    )


def timing_lost_record(built: dict[str, Any], attempts: int, message: str, timing_worker: str) -> Record:
    """The record of a job that built and verified (``built``: the build half's record fields) but whose
    timing worker, or the node holding its artefacts, died on every try: ``timing_failed`` with error
    kind ``worker_lost`` — it counts as compiled and correct (what was measured stands), never as fast."""
    return Record(**built | {
        "status": Status.TIMING_FAILED,
        "error_kind": ErrorKind.WORKER_LOST,
        "error_message": message[:4000],
        "timing_worker": timing_worker,
        "attempts": attempts,
    })


@dataclass
class _Slot:
    index: int
    role: str = "job"  # "job": whole jobs; "build": build halves; "time": timing halves (pinned to node_id)
    node_id: str | None = None
    actor: Any = None
    name: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    ready: bool = False
    setup_deaths: int = 0  # consecutive deaths before ready()
    dead: bool = False  # gave up on this slot
    stage: str = ""  # last stage the worker reported for its running job
    last_task: str | None = None  # task id of the last job handed to this worker (kit.jobqueue affinity)


#: seconds between checks that waiting workers still have a node to start on
PLACE_CHECK_S = 5.0
#: seconds between asking busy workers for their stage
STAGE_POLL_S = 1.0


class _Driver:
    """The ``ray.wait`` loop: hands jobs to ready actors, writes records, replaces dead actors.

    With ``dispatch.build_resource`` a job goes to a build worker (``build``), and what it ships to a queue
    for the timing workers (``time``); a build worker stops taking jobs while that queue holds
    ``2 x timing workers`` (so shipped artefacts do not pile up in the object store)."""

    def __init__(
        self, cfg: EvalConfig, run_dir: Path, setup_fn: SetupFn, job_fn: JobFn, n_workers: int,
        time_fn: TimeFn = default_time,
    ) -> None:
        from kit.shards import ShardWriter

        self._writer_cls = ShardWriter
        self.kit_digest = kit_digest()
        self.cfg = cfg
        self.run_dir = run_dir
        self.setup_fn = setup_fn
        self.job_fn = job_fn
        self.time_fn = time_fn
        d = cfg.dispatch
        self.split = d.build_resource is not None
        # a second thread per actor answers stage() while a job runs; the driver never sends two jobs
        opts: dict[str, Any] = {"num_cpus": 1, "max_restarts": 0, "max_concurrency": 2}
        placement = d.build_resource if self.split else d.timing_resource
        if placement is not None:
            opts["resources"] = {placement: RESOURCE_FRACTION}
        self.actor_cls = ray.remote(**opts)(_JobActor)
        self.slots = [_Slot(i, "build" if self.split else "job") for i in range(n_workers)]
        timers = timer_nodes(cfg)  # none with timing off: build workers write the final records
        if timers:
            # no CPU reserved: exclusivity on the node comes from the node gate, and a node that carries
            # both labels must still place its build workers
            self.timer_cls = ray.remote(
                num_cpus=0, max_restarts=0, max_concurrency=2, resources={d.timing_resource: RESOURCE_FRACTION}
            )(_TimeActor)
            self.slots += [_Slot(i, "time", node_id=nid) for i, nid in enumerate(timers)]
        self.n_timers = sum(1 for s in self.slots if s.role == "time")
        self.native_key: str | None = None
        self.time_queue: collections.deque[tuple[Job, Any]] = collections.deque()
        self.payloads: dict[Any, Any] = {}  # build's record ref -> its artefacts ref
        self.built_fields: dict[str, dict[str, Any]] = {}  # job id -> record fields of its last finished build
        self.writers: dict[str, Any] = {}
        self.inflight: dict[Any, tuple[str, _Slot, Job | None]] = {}
        self.tries: dict[str, int] = collections.Counter()
        self.first_start: dict[str, str] = {}
        self.infos: list[dict[str, Any]] = []
        self.prov: dict[str, Any] | None = None  # this session's provenance (kit.provenance.collect + dispatch)
        self.prov_before = provenance.load(run_dir)  # the file as this session found it (a resumed run)
        self.last_poll = 0.0
        self.last_place_check = 0.0
        #: monotonic time the first worker became ready and the last record arrived (Ray's fixed start excluded)
        self.first_ready: float | None = None
        self.last_record: float | None = None

    # -- actors ---------------------------------------------------------------------------------------
    def _spawn(self, slot: _Slot) -> None:
        slot.ready, slot.stage = False, ""
        if slot.role == "time":
            src = next((s for s in self.slots if s.role == "build" and s.ready), None)
            if src is None:  # spawned by _on_ready of the first build worker
                slot.actor = None
                return
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            native_ref = src.actor.native_bundle.remote()  # resolved by Ray into the constructor's argument
            strategy = NodeAffinitySchedulingStrategy(node_id=slot.node_id, soft=False)
            slot.actor = self.timer_cls.options(scheduling_strategy=strategy).remote(
                self.cfg, slot.index, src.info["native_key"], native_ref, self.time_fn
            )
        else:
            slot.actor = self.actor_cls.remote(self.cfg, slot.index, self.setup_fn, self.job_fn)
        self.inflight[slot.actor.ready.remote()] = ("ready", slot, None)

    def _retire(self, slot: _Slot) -> None:
        if slot.actor is not None:
            try:
                ray.kill(slot.actor, no_restart=True)
            except Exception as exc:  # noqa: BLE001 - already gone
                log.debug("ray.kill(%s): %s", slot.name, exc)
        slot.actor, slot.ready = None, False

    def start(self) -> None:
        for slot in self.slots:
            self._spawn(slot)

    def close(self) -> None:
        """Release every live actor's workspace, then end the actors."""
        refs = [s.actor.close.remote() for s in self.slots if s.actor is not None and s.ready]
        try:
            ray.wait(refs, num_returns=len(refs), timeout=30)
        except Exception as exc:  # noqa: BLE001 - best effort: killing the actor releases its locks too
            log.debug("closing workers: %s", exc)
        for s in self.slots:
            self._retire(s)
        for w in self.writers.values():
            w.close()

    # -- the loop -------------------------------------------------------------------------------------
    def _busy(self, slot: _Slot) -> bool:
        return any(s is slot and kind in ("job", "build", "time") for kind, s, _ in self.inflight.values())

    def _jobs_inflight(self) -> bool:
        return any(kind in ("job", "build", "time") for kind, _, _ in self.inflight.values())

    def _hand_out(self, queue: JobQueue) -> None:
        for slot in self.slots:
            if not slot.ready or self._busy(slot):
                continue
            if slot.role == "time":
                if self.time_queue:
                    job, payload = self.time_queue.popleft()
                    self.inflight[slot.actor.time.remote(job, payload)] = ("time", slot, job)
                continue
            if not queue or (slot.role == "build" and self.n_timers and len(self.time_queue) >= 2 * self.n_timers):
                continue
            others = {s.last_task for s in self.slots if s is not slot and s.role != "time" and s.last_task}
            job = queue.take(slot.last_task, others)
            slot.last_task = job.task.id
            self.tries[job.job_id] += 1
            self.first_start.setdefault(job.job_id, datetime.now(UTC).isoformat(timespec="seconds"))
            if slot.role == "job":
                self.inflight[slot.actor.run.remote(job)] = ("job", slot, job)
            else:
                rec_ref, payload_ref = slot.actor.build.options(num_returns=2).remote(job)
                self.inflight[rec_ref] = ("build", slot, job)
                self.payloads[rec_ref] = payload_ref

    def _poll_stages(self) -> None:
        now = time.monotonic()
        if now - self.last_poll < STAGE_POLL_S:
            return
        self.last_poll = now
        polling = {id(s) for kind, s, _ in self.inflight.values() if kind == "stage"}
        for slot in self.slots:
            if slot.ready and id(slot) not in polling and self._busy(slot):
                self.inflight[slot.actor.stage.remote()] = ("stage", slot, None)

    def running_by_stage(self) -> collections.Counter:
        """Jobs running now per stage (a worker that has not reported yet counts under its role's first stage)."""
        counts: collections.Counter = collections.Counter()
        for slot in self.slots:
            if self._busy(slot):
                counts[slot.stage or ("time" if slot.role == "time" else "build")] += 1
        return counts

    def _check_placeable(self, queue: JobQueue) -> None:
        """Raise :class:`DispatchError` when workers wait to start but no alive node can take them (their
        node died and none other carries the resource): Ray would wait for such a node forever."""
        now = time.monotonic()
        if now - self.last_place_check < PLACE_CHECK_S:
            return
        self.last_place_check = now
        if not any(s.actor is not None and not s.ready and not s.dead for s in self.slots):
            return
        d = self.cfg.dispatch
        nodes = _alive_nodes()
        field_name, res = ("build_resource", d.build_resource) if self.split else ("timing_resource", d.timing_resource)
        workers_ok = any(n["Resources"].get("CPU", 0) > 0 and (res is None or n["Resources"].get(res, 0) > 0)
                         for n in nodes)
        if not workers_ok and not any(s.ready for s in self.slots if s.role != "time"):
            left = len(queue) + len(self.time_queue)
            raise DispatchError(f"dispatch.{field_name}: no alive node with a CPU carries {res!r} any more and no "
                                f"worker is left ({left} jobs left; rerun to resume when nodes are back)")

    def _check_alive(self, queue: JobQueue) -> None:
        """Raise :class:`DispatchError` when no worker is left for the jobs still to do."""
        self._check_placeable(queue)
        left = len(queue) + len(self.time_queue)
        if all(s.dead for s in self.slots if s.role != "time"):
            raise DispatchError(f"dispatch: every worker died during setup ({left} jobs left; rerun to resume)")
        if self.n_timers and all(s.dead for s in self.slots if s.role == "time"):
            raise DispatchError(
                f"dispatch.timing_resource: no timing worker is left on the nodes carrying "
                f"{self.cfg.dispatch.timing_resource!r} (they died during setup or their node is gone; "
                f"{left} jobs left; rerun to resume)"
            )

    def run(self, jobs: Sequence[Job], progress: Any, bar: Any, tally: StageTally) -> None:
        queue = JobQueue(jobs)
        max_tries = 1 + self.cfg.dispatch.max_retries
        while queue or self.time_queue or self._jobs_inflight():
            self._check_alive(queue)
            self._hand_out(queue)
            if not self.inflight:
                time.sleep(POLL_S)
                continue
            self._poll_stages()
            done, _ = ray.wait(list(self.inflight), num_returns=1, timeout=POLL_S)
            for ref in done:
                kind, slot, job = self.inflight.pop(ref)
                if kind == "ready":
                    self._on_ready(ref, slot)
                    continue
                if kind == "stage":
                    try:
                        slot.stage = ray.get(ref) if self._busy(slot) else ""
                    except Exception:  # noqa: BLE001 - the worker died; its job's ref reports that
                        slot.stage = ""
                    continue
                assert job is not None
                shard = slot.name  # the actor that ran this try (before a replacement renames the slot)
                rec = self._on_result(kind, ref, slot, job, max_tries, queue)
                slot.stage = ""
                # the freed worker gets its next job before the record is written (two fsyncs, ~7 ms a record
                # on 2 cores, that the worker would otherwise wait out)
                self._hand_out(queue)
                if rec is not None:
                    self.last_record = time.monotonic()
                    self._writer(shard).append(rec)
                    tally.add(rec)
                    if progress.disable:
                        log.info("%s/%s/%s: %s (%d tries) %s", rec.task_id, rec.method, rec.sample_id,
                                 rec.status.value, rec.attempts, rec.error_message[:120])
            progress.update(bar, completed=tally.done, status=tally.line(self.running_by_stage(), len(self.time_queue)))

    def _on_ready(self, ref: Any, slot: _Slot) -> None:
        try:
            info = ray.get(ref)
        except ActorUnschedulableError as exc:  # pinned to a node that is gone: this slot is over
            log.warning("worker slot %s%d cannot be placed any more (its node is gone); dropped: %s",
                        slot.role, slot.index, _first_lines(str(exc)))
            slot.actor, slot.ready, slot.dead = None, False, True
            return
        except RayActorError as exc:  # died while setting up: try a fresh actor a few times
            slot.setup_deaths += 1
            self._retire(slot)
            if slot.setup_deaths > 1 + self.cfg.dispatch.max_retries:
                log.warning("worker slot %s%d died %d times during setup; dropped: %s",
                            slot.role, slot.index, slot.setup_deaths, exc)
                slot.dead = True
            else:
                self._spawn(slot)
            return
        except RayTaskError as exc:  # setup raised: a setup error (bad tree, failed native build) ends the run
            raise _setup_error(exc, slot) from exc
        if info["kit_digest"] != self.kit_digest:
            raise DispatchError(
                f"worker {info['name']} on {info['host']} ({info['ip']}) runs kit sources {info['kit_digest']}, "
                f"the driver {self.kit_digest}: install the same kit on every node (and do not edit it mid-run)"
            )
        if self.split and slot.role == "build":
            if self.native_key is None:
                self.native_key = info["native_key"]
            elif info["native_key"] != self.native_key:
                first = next(i for i in self.infos if i.get("native_key") == self.native_key)
                raise DispatchError(
                    f"build workers {first['name']} ({first['host']}) and {info['name']} ({info['host']}) built "
                    f"different native baselines ({self.native_key} vs {info['native_key']}: another compiler, "
                    f"architecture or tree): the nodes with dispatch.build_resource must be alike"
                )
        slot.ready, slot.setup_deaths, slot.name, slot.info = True, 0, info["name"], info
        self.infos.append(info)
        if self.first_ready is None:
            self.first_ready = time.monotonic()
        log.info("worker %s ready on %s (%s, pid %s)", info["name"], info["host"], info["ip"], info["pid"])
        if slot.role != "time" and self.prov is None:
            self._write_provenance(slot)
        if slot.role == "time":
            self._add_timing_provenance(slot)
        if slot.role == "build":  # timing workers get the native baseline from a ready build worker
            for t in self.slots:
                if t.role == "time" and t.actor is None and not t.dead:
                    self._spawn(t)

    def _on_result(
        self, kind: str, ref: Any, slot: _Slot, job: Job, max_tries: int, queue: JobQueue
    ) -> Record | None:
        tries = self.tries[job.job_id]
        payload = self.payloads.pop(ref, None)
        try:
            rec: Record | dict[str, Any] = ray.get(ref)
        except (RayActorError, ObjectLostError) as exc:  # the worker (or the node holding the artefacts) died
            name = slot.name
            if isinstance(exc, RayActorError):
                self._retire(slot)
                self._spawn(slot)
            if tries < max_tries:
                log.warning("worker %s died during %s/%s/%s (try %d of %d); retrying", name, job.task.id, job.method,
                            job.sample_id, tries, max_tries)
                queue.appendleft(job)
                return None
            msg = f"worker died on each of {tries} tries; last: {name}: {_first_lines(str(exc))}"
            built = self.built_fields.pop(job.job_id, None)
            if kind == "time" and built is not None:
                return timing_lost_record(built, tries, msg, name)
            return lost_record(job, tries, Status.WORKER_LOST, msg, name, self.first_start[job.job_id])
        except RayTaskError as exc:  # the job function itself raised (run_job never does for a candidate's fault)
            msg = f"job function raised on {slot.name}: {exc}"
            return lost_record(job, tries, Status.HARNESS_ERROR, msg, slot.name, self.first_start[job.job_id])
        if isinstance(rec, dict):  # built and verified: its artefacts wait for a timing worker
            assert kind == "build" and payload is not None
            self.built_fields[job.job_id] = rec
            self.time_queue.append((job, payload))
            return None
        self.built_fields.pop(job.job_id, None)
        return rec.model_copy(update={"attempts": tries})

    def _writer(self, name: str) -> Any:
        if name not in self.writers:
            self.writers[name] = self._writer_cls(self.run_dir, _shard_name(name))
        return self.writers[name]

    def _write_provenance(self, slot: _Slot) -> None:
        try:
            prov = ray.get(slot.actor.provenance.remote(), timeout=120)
        except Exception as exc:  # noqa: BLE001 - provenance is informative; the run goes on
            log.warning("provenance from %s failed: %s", slot.name, exc)
            return
        d = self.cfg.dispatch
        prov["dispatch"] = {"mode": d.mode, "address": d.address, "timing_resource": d.timing_resource,
                            "build_resource": d.build_resource, "workers": len(self.slots) - self.n_timers,
                            "first_worker": slot.info, "timing_workers": []}
        self.prov = prov
        self._save_provenance()

    def _add_timing_provenance(self, slot: _Slot) -> None:
        """A timing worker's node: its CPU model becomes the run's ``cpu_model`` (the build node's is kept
        as ``build_cpu_model``), since timings are that CPU's."""
        if self.prov is None:
            return
        try:
            info = ray.get(slot.actor.provenance.remote(), timeout=120)
        except Exception as exc:  # noqa: BLE001 - informative only
            log.warning("provenance from %s failed: %s", slot.name, exc)
            return
        timers = self.prov["dispatch"]["timing_workers"]
        if not timers:
            self.prov["build_cpu_model"] = self.prov.get("cpu_model")
            self.prov["build_arch"] = self.prov.get("arch")
            self.prov["cpu_model"], self.prov["arch"] = info["cpu_model"], info["arch"]
        timers.append(info)
        self._save_provenance()

    def _save_provenance(self) -> None:
        assert self.prov is not None
        provenance.save(self.run_dir, self.prov_before, self.prov)


def _setup_error(exc: RayTaskError, slot: _Slot) -> BaseException:
    """The exception a worker's setup raised, as it raised it (what ``ray.get`` raises is Ray's wrapper:
    an instance of the same type, but its message is the remote traceback), noted with the worker it came
    from; the wrapper itself when Ray could not ship the original."""
    cause = getattr(exc, "cause", None)
    if not isinstance(cause, Exception) or isinstance(cause, RayTaskError):
        return exc
    where = f"worker slot {'t' if slot.role == 'time' else 'w'}{slot.index}"
    # the wrapper's first line: "ray::_JobActor.ready() (pid=..., ip=..., ...)"
    at = re.search(r"\(pid=(\d+), ip=([^,)]+)", str(exc))
    if at:
        where += f" (pid {at[1]} on {at[2]})"
    log.info("the setup of %s failed; ending the run", where)
    cause.add_note(f"raised by the setup of Ray {where}")
    return cause


def _shard_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_." else "_" for c in name) or "worker"


def _first_lines(text: str, n: int = 3) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[:n])


def run_distributed(
    cfg: EvalConfig,
    jobs: Sequence[Job],
    run_dir: Path,
    *,
    setup_fn: SetupFn = default_setup,
    job_fn: JobFn = default_job,
    time_fn: TimeFn = default_time,
) -> dict[str, Any]:
    """Run every job of ``jobs`` not yet recorded in ``run_dir`` on Ray workers; returns counts
    ``{"jobs", "skipped", "ran", "workers", "work_s"}`` (``work_s``: seconds from the first worker ready to
    the last record, i.e. the run without Ray's and the workers' fixed start).

    Ray must be initialised (see :func:`connect`).  Records go to ``run_dir/shards`` as they arrive.
    ``job_fn`` runs whole jobs; with ``dispatch.build_resource`` the build workers run
    :func:`kit.pipeline.build_job` and the timing workers ``time_fn`` instead.

    Raises:
        DispatchError: see the class.
        Exception: whatever ``setup_fn`` raised on a worker (e.g. :class:`kit.mnn.source.SourceError`):
            that exception itself, its message unchanged (Ray's wrapper, with the remote traceback, is its
            ``__cause__``; a note names the worker slot).
    """
    from kit.shards import done_job_ids

    run_dir.mkdir(parents=True, exist_ok=True)
    done = done_job_ids(run_dir)
    pending: dict[str, Job] = {}
    for j in jobs:
        if j.job_id not in done:
            pending.setdefault(j.job_id, j)
    unique = len({j.job_id for j in jobs})
    n = worker_count(cfg)
    where = f"{n} Ray worker(s)"
    if cfg.dispatch.build_resource is not None:
        where = f"{n} Ray build worker(s) and {len(timer_nodes(cfg))} timing worker(s)"
    print(f"mkb eval: {unique} jobs, {unique - len(pending)} already recorded in {run_dir}; "
          f"{len(pending)} to run on {where}")
    if not pending:
        return {"jobs": unique, "skipped": unique, "ran": 0, "workers": 0, "work_s": 0.0}
    driver = _Driver(cfg, run_dir, setup_fn, job_fn, n, time_fn)
    tally = StageTally(total=len(pending))
    with job_progress() as progress:
        bar = progress.add_task("eval", total=len(pending), status="starting workers")
        driver.start()
        try:
            driver.run(list(pending.values()), progress, bar, tally)
        finally:
            driver.close()
    work_s = (driver.last_record - driver.first_ready) if driver.first_ready and driver.last_record else 0.0
    return {"jobs": unique, "skipped": unique - len(pending), "ran": tally.done, "workers": n, "work_s": work_s}


def evaluate_distributed(
    cfg: EvalConfig,
    tasks: list[Task],
    all_ids: set[str],
    *,
    jobs: Sequence[Job] | None = None,
    setup_fn: SetupFn = default_setup,
    job_fn: JobFn = default_job,
) -> int:
    """``mkb eval`` with ``dispatch.mode`` ``processes`` or ``ray``: make the jobs, run the pending ones on
    Ray workers (:func:`run_distributed`), print the headline metrics.  Returns 0.

    ``jobs`` defaults to :func:`kit.evaluate.plan_jobs` (the native method's files are read from the
    pristine tree on the driver); the records of samples naming unknown tasks are written by the driver.  Raises what :func:`run_distributed` and ``plan_jobs`` raise.
    """
    from kit.evaluate import plan_jobs, print_summary, write_orphans
    from kit.shards import read_records

    if jobs is None:
        root = None
        if cfg.candidates.native:
            from kit.mnn.source import ensure_pristine

            root = ensure_pristine(cfg).root
        jobs, orphans, done = plan_jobs(cfg, tasks, all_ids, root)
        cfg.run.dir.mkdir(parents=True, exist_ok=True)
        write_orphans(orphans, cfg.run.dir, done)
    started = connect(cfg)
    try:
        run_distributed(cfg, jobs, cfg.run.dir, setup_fn=setup_fn, job_fn=job_fn)
    finally:
        if started:
            ray.shutdown()
    print_summary(read_records(cfg.run.dir), tasks, cfg)
    return 0
