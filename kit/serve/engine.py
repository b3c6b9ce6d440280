"""The engine of ``mkb serve``: accepted checks in a bounded queue, worker threads that each own a build worker
(:func:`kit.job.worker.setup_worker`: a workspace, the native baseline, the node's timing gate, the sandbox) and
run one check at a time through the kit's pipeline (:func:`kit.job.pipeline.run_job`), as ``mkb eval``'s serial
executor does; each record goes into its lane's shards (:mod:`kit.serve.lane`) as it finishes.

    submit: task known? → the candidate parsed and checked (a refused one is recorded at once: nothing to build)
            → an identical earlier check answers it (the cache) / a reused sample id is refused
            → the queue has room? → journal line fsynced → queued (acknowledged)
    worker: take → run_job → record into the lane's shards → done (the verdict)

Opening the engine reads each lane's records (finished checks, answered again after a restart) and queues the
journal's checks that have none yet, before setting up the workers.

Where the checks run: when the config names a Ray cluster (``dispatch.mode = "ray"`` with ``dispatch.address``:
:func:`on_ray`), each worker thread hands its checks to a Ray build worker of the cluster
(:class:`kit.dispatch.serving.RayPlace`, ``mkb eval``'s actor); otherwise the thread runs them in a build worker
of this process.  Queue, cache, journal and records are this process's either way.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from kit import candidates as kcand
from kit.candidates.model import text_sha256
from kit.job.pipeline import run_job
from kit.job.record import Job, job_from, lost_record, rejected_record
from kit.job.worker import Worker, setup_worker
from kit.mnn.source import ensure_pristine
from kit.results.records import Record, Status
from kit.run import provenance as prov
from kit.serve.checks import Check, Registry
from kit.serve.lane import JournalEntry, Lane, no_timing_config
from kit.serve.models import CheckRequest, CheckView, Stats
from kit.settings.config import ConfigError, EvalConfig
from kit.suite.tasks import Task, load_suite

log = logging.getLogger("kit")

#: the shard (worker name) of the records of candidates refused before any build
REFUSED_SHARD = "serve"
#: finished checks of a lane between two rewrites of its journal
COMPACT_EVERY = 64


def on_ray(cfg: EvalConfig) -> bool:
    """Whether the service's checks run on a Ray cluster's actors: the config names one (``dispatch.mode =
    "ray"`` with ``dispatch.address``).  An embedded Ray (no address, or ``processes``) would only add its
    start-up and a process hop to the same cores: the service's own threads run those."""
    return cfg.dispatch.mode == "ray" and cfg.dispatch.address is not None


def _on_actor(job: Job, place: Any) -> Record | None:
    """The job function of a Ray worker thread: the check on the place's actor (None: abandoned at close)."""
    return place.run(job)


class UnknownTask(Exception):
    """A check names a task the service does not serve (not in the config's task selection)."""


class Engine:
    """Checks in, verdicts out (module docstring).  ``workers``: worker threads, each with a build worker of its own
    (the first free workspace), or on a Ray cluster (:func:`on_ray`) each with an actor, capped by the cluster's
    CPUs; None: 1 here, ``dispatch.workers`` on Ray.  ``queue_limit``: checks that may wait; ``setup`` and
    ``job_fn``: as :class:`kit.run.serial_executor.SerialExecutor`'s (this process's workers only).
    :meth:`open` before use, :meth:`close` after.

    Raises:
        kit.settings.config.ConfigError: several workers in this process where a worker's container or adb
            device is the process's (``container.mode = "docker"``, ``[device]``)."""

    def __init__(self, cfg: EvalConfig, workers: int | None = None, queue_limit: int = 64,
                 setup: Callable[[EvalConfig], Worker] = setup_worker,
                 job_fn: Callable[[Job, Worker], Record] = run_job) -> None:
        self.on_ray = on_ray(cfg)
        workers = workers if workers is not None else (cfg.dispatch.workers if self.on_ray else 1)
        if workers > 1 and not self.on_ray and (cfg.container.mode != "host" or cfg.device.kind == "adb"):
            # the container a worker's commands run in, and an adb device, are this process's, not a thread's
            raise ConfigError("--workers: one worker per service with container.mode = \"docker\" or an adb "
                              "[device]; start a service per worker instead")
        self.cfg = cfg
        self.tasks: dict[str, Task] = {t.id: t for t in load_suite(cfg.tasks.dir, cfg.tasks.split,
                                                                     cfg.tasks.ids or None)}
        self.registry = Registry(queue_limit)
        self.n_workers = workers
        self.mnn_root: Path | None = None
        self._setup, self._job_fn = setup, (_on_actor if self.on_ray else job_fn)
        self._lanes: dict[bool, Lane] = {}
        self._workers: list[Any] = []  # Worker, or kit.dispatch.serving.RayPlace on Ray
        self._pool: Any = None  # kit.dispatch.serving.RayPlaces on Ray
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------------------------------- life

    def open(self) -> Engine:
        """Open the lanes (their run directories checked and locked before any slow setup), restore their
        checks, set up the workers and start their threads.  Returns self.

        Raises:
            kit.settings.config.ConfigError: a run directory holds another config's records or is in use.
            what :func:`kit.job.worker.setup_worker` raises (nothing is left open then); on Ray, what
            :meth:`kit.dispatch.serving.RayPlaces.open` raises."""
        try:
            self.lane(True)
            if no_timing_config(self.cfg).run.dir.is_dir():
                self.lane(False)
            if self.on_ray and self.n_workers:
                from kit.dispatch.serving import RayPlaces  # imports Ray: only for a service that uses it

                pool = RayPlaces(self.cfg, self.n_workers)
                self._workers, self._pool = pool.open(), pool
            else:
                for _ in range(self.n_workers):
                    self._workers.append(self._setup(self.cfg))
            self.mnn_root = ensure_pristine(self.cfg.mnn).root
        except BaseException:
            self.close()
            raise
        for lane in list(self._lanes.values()):  # an engine without workers runs nothing: no session noted
            if self._workers:
                self._start_session(lane)
        for i, worker in enumerate(self._workers):
            t = threading.Thread(target=self._work, args=(worker,), name=f"mkb-serve-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def close(self, wait_s: float | None = None) -> None:
        """Stop taking checks; wait up to ``wait_s`` seconds (None: until it ends) for each worker's running
        check; close the lanes.  A check left running or queued is in its lane's journal: the next
        :meth:`open` runs it."""
        self.registry.close()
        for t in self._threads:
            t.join(wait_s)
        if not self._threads:  # never started: the workers set up so far are released here
            for w in self._workers:
                w.release()
        if self._pool is not None:  # the Ray actors ended (a check still on one is abandoned: journaled)
            self._pool.close()
        for lane in self._lanes.values():
            lane.close()

    def lane(self, timing: bool) -> Lane:
        """The lane of checks with (``timing``) or without timing, opened on first use (a config whose timing is
        off has one lane for both)."""
        timing = timing and self.cfg.timing.enabled
        with self.registry.cond:
            if timing not in self._lanes:
                lane = Lane(self.cfg if timing == self.cfg.timing.enabled else no_timing_config(self.cfg))
                self._lanes[timing] = lane
                self._restore(lane)
                if self._threads:  # opened while serving: its session noted now
                    self._start_session(lane)
            return self._lanes[timing]

    def _restore(self, lane: Lane) -> None:
        """Index ``lane``'s records (finished checks) and queue its journal's checks without one."""
        records = lane.records()
        for rec in records.values():
            self.registry.restore(rec, lane)
        unfinished = lane.unfinished(set(records))
        for e in unfinished:
            if e.task_id not in self.tasks:  # the config no longer serves its task
                log.warning("%s: check %s of task %s not run again: the task is not served", lane.run_dir, e.id,
                            e.task_id)
                continue
            job = self._job(self.tasks[e.task_id], lane, e.method, e.sample_id, e.files, e.response)
            self.registry.add(Check(job.job_id, e.task_id, e.method, e.sample_id, job.candidate_sha256, lane, job,
                                    entry=e))
        if records or unfinished:
            log.info("%s: %d finished check(s) kept, %d accepted one(s) queued again", lane.run_dir, len(records),
                     len(unfinished))

    def _start_session(self, lane: Lane) -> None:
        """Note this session in ``lane``'s provenance: the facts of the first worker's node (on Ray, its
        actor's, and the dispatch as ``mkb eval`` notes it)."""
        first = self._workers[0]
        if self._pool is not None:
            lane.start_session(first.session, self._pool.dispatch())
        else:
            lane.start_session(lambda cfg: prov.collect(cfg, first))

    # ---------------------------------------------------------------------------------------- checks

    def submit(self, req: CheckRequest) -> CheckView:
        """Accept ``req``: its check, queued (journaled first), or finished at once (a candidate refused before
        any build; an identical earlier check, ``cached``).

        Raises:
            UnknownTask: ``req.task_id`` is not served.
            kit.serve.checks.SampleConflict: the sample id already names another candidate.
            kit.serve.checks.QueueFull: the queue is full."""
        task = self.tasks.get(req.task_id)
        if task is None:
            raise UnknownTask(f"task_id: unknown task {req.task_id!r} (GET /v1/tasks lists the tasks served)")
        lane = self.lane(req.options.timing)
        raw = kcand.files_sha256(req.files) if req.files is not None else text_sha256(req.response or "")
        sample_id = req.sample_id or raw[:16]
        job = self._job(task, lane, req.method, sample_id, req.files, req.response)
        reg = self.registry
        with reg.cond:  # one decision per candidate: two identical submissions never make two records
            hit = reg.known(lane.digest, task.id, job.candidate_sha256, req.method, sample_id)
            if hit is not None:
                return hit.view(reg.position(hit), cached=True)
            entry = JournalEntry(job.job_id, task.id, req.method, sample_id, req.files, req.response)
            check = Check(job.job_id, task.id, req.method, sample_id, job.candidate_sha256, lane, job, entry)
            if job.files is None:  # refused before any build: recorded now
                rec = rejected_record(job)
                lane.write(REFUSED_SHARD, rec, entry)
                reg.add(check, queued=False)
                reg.finish(check, rec)
                return check.view()
            reg.room()
            lane.accept(entry)
            reg.add(check)
            return check.view(reg.position(check))

    def view(self, check_id: str) -> CheckView | None:
        """The check ``check_id`` as it is now (None: unknown)."""
        check = self.registry.checks.get(check_id)
        return None if check is None else check.view(self.registry.position(check))

    def stats(self) -> Stats:
        return self.registry.stats(len(self._workers))

    def _job(self, task: Task, lane: Lane, method: str, sample_id: str, files: dict[str, str] | None,
             response: str | None) -> Job:
        """The job of a candidate given as ``files`` or a raw ``response``, under ``lane``'s digest."""
        limit = self.cfg.candidates.max_file_bytes
        if files is not None:
            cand = kcand.make_candidate(method, task, sample_id, files, limit, "serve")
        else:
            cand = kcand.candidate_from_response(method, task, sample_id, response or "", limit, "serve")
        return job_from(cand, task, lane.digest, lane.cfg.target_info())

    # --------------------------------------------------------------------------------------- workers

    def _work(self, worker: Worker) -> None:
        """A worker thread: take a check, run it in ``worker`` (a view of it with the check's lane's config),
        record it, until the engine closes; then release the worker."""
        views: dict[str, Worker] = {}
        try:
            while (check := self.registry.take()) is not None:
                lane = check.lane
                place = views.setdefault(lane.digest, worker if lane.cfg is self.cfg else replace(worker, cfg=lane.cfg))
                check.place = place
                assert check.job is not None
                rec = self._run(check.job, place)
                if rec is None:  # abandoned by a closing Ray pool: still in the journal, run at the next start
                    break
                assert check.entry is not None
                lane.write(place.name, rec, check.entry)
                self.registry.finish(check, rec)
                self._compact(lane)
        finally:
            worker.release()

    def _compact(self, lane: Lane) -> None:
        """Every :data:`COMPACT_EVERY` finished checks of ``lane``, rewrite its journal with the checks still to
        run (no check is accepted meanwhile), so that it stays small."""
        with self.registry.cond:
            lane.finished_since_compact += 1
            if lane.finished_since_compact >= COMPACT_EVERY:
                lane.compact([c.entry for c in self.registry.pending(lane) if c.entry is not None])

    def _run(self, job: Job, place: Worker) -> Record | None:
        """``job_fn(job, place)``; a fault of the kit outside the pipeline's own mapping is a harness error."""
        try:
            return self._job_fn(job, place)
        except Exception as exc:  # noqa: BLE001 - every accepted check yields one record
            log.error("check %s: %s", job.job_id, exc)
            return lost_record(job, 1, Status.HARNESS_ERROR, f"{type(exc).__name__}: {exc}\n"
                               f"{traceback.format_exc()[-3000:]}", place.name)
