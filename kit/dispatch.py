"""Spread an evaluation over local cores or a Ray cluster (``dispatch.mode = "processes" | "ray"``).

The only module that imports Ray.

* **Cluster.** ``mode = "ray"`` with ``dispatch.address`` unset, and ``mode = "processes"`` always, start an
  embedded Ray instance on this host (``ray.init(address="local")``: no cluster to start, stopped at the
  end); ``mode = "ray"`` with an address (``auto``, ``ray://head:10001``, ``host:6379``) joins that cluster.
  If Ray is already initialised in this process, that connection is used and left open.
* **Workers.** ``min(dispatch.workers, CPUs)`` Ray actors (one CPU each; CPUs counted on the nodes that
  carry ``dispatch.timing_resource`` when it is set, and the actors then request ``0.01`` of that custom
  resource so they are placed only there).  Each actor calls ``setup_fn(cfg, index, name)`` once in its
  ``__init__`` — by default :func:`kit.evaluate.setup_worker`, which locks workspace ``w<index>`` on its node
  for the actor's life — and then runs ``job_fn(job, state)`` per job (default :func:`kit.pipeline.run_job`).
  ``name`` is ``n<node id, 8 hex>.w<index>``; it becomes ``Record.worker`` and the shard name.
* **Timing exclusivity** is not scheduled here: :class:`kit.gate.NodeGate` (a file lock in the node's cache
  directory) lets one timing phase run per node with nothing building beside it, whichever actor holds it.
* **Records.** The driver receives each :class:`~kit.records.Record` as it completes (``ray.wait``) and
  appends it to the shard of the actor that produced it (:class:`kit.shards.ShardWriter`, one file per
  record), so only the driver writes files and a killed driver loses only the jobs in flight.  Rerunning
  the same command skips every job already in the shards (:func:`kit.shards.done_job_ids`).
* **Faults.** If an actor dies during a job (``RayActorError``), a new actor takes its slot and the job is
  retried, up to ``dispatch.max_retries`` times; then the job gets a ``worker_lost`` record.  If ``job_fn``
  raises, the job gets a ``harness_error`` record.  Either way every job yields exactly one record, with
  ``Record.attempts`` = number of tries.  A failing ``setup_fn`` aborts the run with its own exception.
* **Remote nodes** need the same ``kit`` installed (checked: :func:`kit_digest` of driver and each worker
  must match, else :class:`DispatchError`), the task suite at ``tasks.dir`` and the MNN source at
  ``mnn.source_dir`` (or network access for the tarball) at the same paths; ``mnn.cache_dir`` is per node.
  Candidate files travel inside the jobs.  Tasks are small (~1 KB pickled), so each job carries its task.

``mode = "processes"`` is the embedded local Ray: the same code path as ``ray`` without an address.
"""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import os
import platform
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayActorError, RayTaskError

from kit.config import EvalConfig
from kit.pipeline import Job, job_fields
from kit.progress import job_progress
from kit.records import ErrorKind, Record, Status
from kit.tasks import Task

log = logging.getLogger("kit")

#: ``setup_fn(cfg, index, name) -> state``: runs once per actor (default: :func:`default_setup`)
SetupFn = Callable[[EvalConfig, int, str], Any]
#: ``job_fn(job, state) -> Record``: runs once per try of a job (default: :func:`kit.pipeline.run_job`)
JobFn = Callable[[Job, Any], Record]

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


class _JobActor:
    """One worker: owns ``setup_fn``'s state (a workspace) for its life and runs jobs in it one at a time."""

    def __init__(self, cfg: EvalConfig, index: int, setup_fn: SetupFn, job_fn: JobFn) -> None:
        self.cfg = cfg
        self.kit_digest = kit_digest()  # the sources this process imports from now on
        self.node_id = ray.get_runtime_context().get_node_id()
        self.name = f"n{self.node_id[:8]}.w{index}"
        self.job_fn = job_fn
        self.state: Any = None
        self.setup_error: BaseException | None = None
        try:
            self.state = setup_fn(cfg, index, self.name)
        except Exception as exc:  # noqa: BLE001 - re-raised by ready()/run() so the driver sees its type
            self.setup_error = exc

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
        }

    def run(self, job: Job) -> Record:
        if self.setup_error is not None:
            raise self.setup_error
        return self.job_fn(job, self.state)

    def provenance(self) -> dict[str, Any]:
        from kit.evaluate import provenance
        from kit.pipeline import Worker

        return provenance(self.cfg, self.state if isinstance(self.state, Worker) else None)

    def close(self) -> None:
        """Release the workspace lock (the process exit would release it too)."""
        ws = getattr(self.state, "workspace", None)
        if ws is not None and hasattr(ws, "release"):
            ws.release()


def connect(cfg: EvalConfig) -> bool:
    """Initialise Ray for ``cfg.dispatch``; True if this call started it (then :func:`ray.shutdown` it)."""
    if ray.is_initialized():
        return False
    d = cfg.dispatch
    if d.mode == "processes" or d.address is None:
        ray.init(address="local", include_dashboard=False)
    else:
        ray.init(address=d.address)
    return True


def worker_count(cfg: EvalConfig) -> int:
    """``dispatch.workers`` capped by the CPUs of the alive nodes (that carry ``dispatch.timing_resource``).

    Raises:
        DispatchError: no alive node carries ``dispatch.timing_resource`` or has a CPU.
    """
    res = cfg.dispatch.timing_resource
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    if res is not None:
        labelled = [n for n in nodes if n["Resources"].get(res, 0) > 0]
        if not labelled:
            have = sorted({k for n in nodes for k in n["Resources"] if not k.startswith("node:")})
            raise DispatchError(
                f"dispatch.timing_resource: no node of the cluster carries resource {res!r} (resources: {have})"
            )
        nodes = labelled
    cpus = int(sum(n["Resources"].get("CPU", 0) for n in nodes))
    if cpus < 1:
        raise DispatchError("dispatch: the cluster's nodes report no CPU")
    return max(1, min(cfg.dispatch.workers, cpus))


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


@dataclass
class _Slot:
    index: int
    actor: Any = None
    name: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    ready: bool = False
    setup_deaths: int = 0  # consecutive deaths before ready()
    dead: bool = False  # gave up on this slot


@dataclass
class _Tally:
    total: int
    done: int = 0
    failed: int = 0
    by_status: collections.Counter = field(default_factory=collections.Counter)

    def add(self, rec: Record) -> None:
        self.done += 1
        self.by_status[rec.status.value] += 1
        if rec.status is not Status.OK:
            self.failed += 1

    def line(self, running: int) -> str:
        counts = " ".join(f"{k}={v}" for k, v in sorted(self.by_status.items()))
        return f"running={running} failed={self.failed} {counts}"


class _Driver:
    """The ``ray.wait`` loop: hands jobs to ready actors, writes records, replaces dead actors."""

    def __init__(self, cfg: EvalConfig, run_dir: Path, setup_fn: SetupFn, job_fn: JobFn, n_workers: int) -> None:
        from kit.shards import ShardWriter

        self._writer_cls = ShardWriter
        self.kit_digest = kit_digest()
        self.cfg = cfg
        self.run_dir = run_dir
        self.setup_fn = setup_fn
        self.job_fn = job_fn
        opts: dict[str, Any] = {"num_cpus": 1, "max_restarts": 0, "max_concurrency": 1}
        if cfg.dispatch.timing_resource is not None:
            opts["resources"] = {cfg.dispatch.timing_resource: RESOURCE_FRACTION}
        self.actor_cls = ray.remote(**opts)(_JobActor)
        self.slots = [_Slot(i) for i in range(n_workers)]
        self.writers: dict[str, Any] = {}
        self.inflight: dict[Any, tuple[str, _Slot, Job | None]] = {}
        self.tries: dict[str, int] = collections.Counter()
        self.first_start: dict[str, str] = {}
        self.infos: list[dict[str, Any]] = []
        #: monotonic time the first worker became ready and the last record arrived (Ray's fixed start excluded)
        self.first_ready: float | None = None
        self.last_record: float | None = None

    # -- actors ---------------------------------------------------------------------------------------
    def _spawn(self, slot: _Slot) -> None:
        slot.actor = self.actor_cls.remote(self.cfg, slot.index, self.setup_fn, self.job_fn)
        slot.ready = False
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
    def run(self, jobs: Sequence[Job], progress: Any, bar: Any, tally: _Tally) -> None:
        queue = collections.deque(jobs)
        max_tries = 1 + self.cfg.dispatch.max_retries
        provenance_written = False
        while queue or any(kind == "job" for kind, _, _ in self.inflight.values()):
            for slot in self.slots:
                busy = any(s is slot for _, s, _ in self.inflight.values())
                if slot.ready and not busy and queue:
                    job = queue.popleft()
                    self.tries[job.job_id] += 1
                    self.first_start.setdefault(job.job_id, datetime.now(UTC).isoformat(timespec="seconds"))
                    self.inflight[slot.actor.run.remote(job)] = ("job", slot, job)
            if not self.inflight:
                if all(s.dead for s in self.slots):
                    raise DispatchError(
                        f"dispatch: every worker died during setup ({len(queue)} jobs left; rerun to resume)"
                    )
                time.sleep(POLL_S)
                continue
            done, _ = ray.wait(list(self.inflight), num_returns=1, timeout=POLL_S)
            for ref in done:
                kind, slot, job = self.inflight.pop(ref)
                if kind == "ready":
                    self._on_ready(ref, slot)
                    if slot.ready and not provenance_written:
                        self._write_provenance(slot)
                        provenance_written = True
                    continue
                assert job is not None
                shard = slot.name  # the actor that ran this try (before a replacement renames the slot)
                rec = self._on_result(ref, slot, job, max_tries, queue)
                if rec is not None:
                    self.last_record = time.monotonic()
                    self._writer(shard).append(rec)
                    tally.add(rec)
                    if progress.disable:
                        log.info("%s/%s/%s: %s (%d tries) %s", rec.task_id, rec.method, rec.sample_id,
                                 rec.status.value, rec.attempts, rec.error_message[:120])
            running = sum(1 for kind, _, _ in self.inflight.values() if kind == "job")
            progress.update(bar, completed=tally.done, status=tally.line(running))

    def _on_ready(self, ref: Any, slot: _Slot) -> None:
        try:
            info = ray.get(ref)
        except RayActorError as exc:  # died while setting up: try a fresh actor a few times
            slot.setup_deaths += 1
            self._retire(slot)
            if slot.setup_deaths > 1 + self.cfg.dispatch.max_retries:
                log.warning("worker slot %d died %d times during setup; dropped: %s", slot.index, slot.setup_deaths, exc)
                slot.dead = True
            else:
                self._spawn(slot)
            return
        except RayTaskError:  # setup_fn raised: a setup error (bad tree, failed native build) ends the run
            raise
        if info["kit_digest"] != self.kit_digest:
            raise DispatchError(
                f"worker {info['name']} on {info['host']} ({info['ip']}) runs kit sources {info['kit_digest']}, "
                f"the driver {self.kit_digest}: install the same kit on every node (and do not edit it mid-run)"
            )
        slot.ready, slot.setup_deaths, slot.name, slot.info = True, 0, info["name"], info
        if self.first_ready is None:
            self.first_ready = time.monotonic()
        self.infos.append(info)
        log.info("worker %s ready on %s (%s, pid %s)", info["name"], info["host"], info["ip"], info["pid"])

    def _on_result(self, ref: Any, slot: _Slot, job: Job, max_tries: int, queue: collections.deque) -> Record | None:
        tries = self.tries[job.job_id]
        try:
            rec: Record = ray.get(ref)
        except RayActorError as exc:
            name = slot.name
            self._retire(slot)
            self._spawn(slot)
            if tries < max_tries:
                log.warning("worker %s died during %s (try %d of %d); retrying", name, job.job_id, tries, max_tries)
                queue.appendleft(job)
                return None
            msg = f"worker died on each of {tries} tries; last: {name}: {_first_lines(str(exc))}"
            return lost_record(job, tries, Status.WORKER_LOST, msg, name, self.first_start[job.job_id])
        except RayTaskError as exc:  # job_fn itself raised (run_job never does for a candidate's fault)
            msg = f"job function raised on {slot.name}: {exc}"
            return lost_record(job, tries, Status.HARNESS_ERROR, msg, slot.name, self.first_start[job.job_id])
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
                            "workers": len(self.slots), "first_worker": slot.info}
        (self.run_dir / "provenance.json").write_text(json.dumps(prov, indent=1, default=str))


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
) -> dict[str, int]:
    """Run every job of ``jobs`` not yet recorded in ``run_dir`` on Ray workers; returns counts
    ``{"jobs", "skipped", "ran", "workers", "work_s"}`` (``work_s``: seconds from the first worker ready to
    the last record, i.e. the run without Ray's and the workers' fixed start).

    Ray must be initialised (see :func:`connect`).  Records go to ``run_dir/shards`` as they arrive.

    Raises:
        DispatchError: see the class.
        Exception: whatever ``setup_fn`` raised on a worker (e.g. :class:`kit.mnn.source.SourceError`);
            the exception is an instance of the original type.
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
    print(f"mkb eval: {unique} jobs, {unique - len(pending)} already recorded in {run_dir}; "
          f"{len(pending)} to run on {n} Ray worker(s)")
    if not pending:
        return {"jobs": unique, "skipped": unique, "ran": 0, "workers": 0}
    driver = _Driver(cfg, run_dir, setup_fn, job_fn, n)
    tally = _Tally(total=len(pending))
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

    ``jobs`` defaults to :func:`kit.evaluate.make_jobs` (the native method's files are read from the
    pristine tree on the driver); the records of samples naming unknown tasks are written by the driver.  Raises what :func:`run_distributed` and ``make_jobs`` raise.
    """
    from kit.evaluate import make_jobs, print_summary, write_orphans
    from kit.shards import done_job_ids, scan

    if jobs is None:
        root = None
        if cfg.candidates.native:
            from kit.mnn.source import ensure_pristine

            root = ensure_pristine(cfg).root
        jobs, orphans = make_jobs(cfg, tasks, all_ids, root)
        cfg.run.dir.mkdir(parents=True, exist_ok=True)
        write_orphans(orphans, cfg.run.dir, done_job_ids(cfg.run.dir))
    started = connect(cfg)
    try:
        run_distributed(cfg, jobs, cfg.run.dir, setup_fn=setup_fn, job_fn=job_fn)
    finally:
        if started:
            ray.shutdown()
    print_summary(scan(cfg.run.dir).collect(), tasks, cfg)
    return 0
