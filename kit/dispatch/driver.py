"""The driver of a Ray run: the ``ray.wait`` loop that hands jobs to ready actors, receives their records,
and replaces actors that die.

* **Records.** The driver receives each :class:`~kit.results.records.Record` as it completes (``ray.wait``) and
  passes it to the run's sink (:class:`kit.results.shards.RecordSink`: one shard file per record, named after the
  actor that produced it), so only the driver writes files and a killed driver loses only the jobs in flight.
* **Faults.** If an actor dies during a job (``RayActorError``), a new actor takes its slot and the job is
  retried, up to ``dispatch.max_retries`` times; then the job gets a ``worker_lost`` record.  If ``job_fn``
  raises, the job gets a ``harness_error`` record.  Either way every job yields exactly one record, with
  ``Record.attempts`` = number of tries.  A failing setup aborts the run with its own exception
  (the one the worker raised, not Ray's wrapper around it, whose message carries the remote traceback).
* **Build and timing nodes apart** (``dispatch.build_resource`` set): what a build actor ships (the
  candidate libraries the runner loads, candidate model, native model: ~4.4 MB for MNN on x86_64) stays in
  Ray's object store; the driver hands that reference to a timing actor (one per ``timing_resource`` node,
  pinned by node affinity, given the native baseline by a build actor at start).  A timing actor that dies,
  or artefacts lost with their node, send the job back to be built again (a try); after the last try the
  record keeps the build's results (:func:`kit.job.record.timing_lost_record`).
* **Progress.** The live display counts jobs running / passed / failed per stage (build, verify, time);
  busy actors report their stage through their second thread (:meth:`kit.dispatch.actors.Actor.stage`).
* **Provenance.** The first ready build worker's facts and the dispatch settings, then each timing worker's
  node, go to the session's :class:`kit.run.provenance.SessionLog`.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import ray
from ray.exceptions import ActorUnschedulableError, ObjectLostError, RayActorError, RayTaskError

from kit.dispatch.actors import JobActor, JobFn, SetupFn, TimeActor, TimeFn, close_actors
from kit.dispatch.cluster import DispatchError, actor_requests, kit_digest, timer_nodes
from kit.dispatch.slots import Slot, check_alive, check_placeable, first_lines, ray_options, setup_error
from kit.host.progress import StageTally, log_record
from kit.job.artefacts import BuildHalf
from kit.job.record import Job, lost_record, timing_lost_record
from kit.results.records import Record, Status
from kit.results.shards import RecordSink
from kit.run.plan import record_setup_failure
from kit.run.provenance import Dispatch, SessionLog
from kit.run.queue import JobQueue
from kit.settings.config import EvalConfig

log = logging.getLogger("kit")

#: seconds between progress refreshes while no result arrives
POLL_S = 0.5
#: seconds between checks that waiting workers still have a node to start on
PLACE_CHECK_S = 5.0
#: seconds between asking busy workers for their stage
STAGE_POLL_S = 1.0


class Driver:
    """The ``ray.wait`` loop: hands jobs to ready actors, passes records to ``sink``, replaces dead actors.

    With ``dispatch.build_resource`` a job goes to a build worker (``build``), and what it ships to a queue
    for the timing workers (``time``); a build worker stops taking jobs while that queue holds
    ``2 x timing workers`` (so shipped artefacts do not pile up in the object store)."""

    def __init__(
        self, cfg: EvalConfig, sink: RecordSink, notes: SessionLog, setup_fn: SetupFn, job_fn: JobFn,
        time_fn: TimeFn, n_workers: int,
    ) -> None:
        self.kit_digest = kit_digest()
        self.cfg = cfg
        self.sink = sink
        self.notes = notes
        self.setup_fn = setup_fn
        self.job_fn = job_fn
        self.time_fn = time_fn
        d = cfg.dispatch
        self.split = d.build_resource is not None
        requests = actor_requests(cfg)
        self.actor_cls = ray.remote(**ray_options(requests["build" if self.split else "job"]))(JobActor)
        self.slots = [Slot(i, "build" if self.split else "job") for i in range(n_workers)]
        timers = timer_nodes(cfg)  # none with timing off: build workers write the final records
        if timers:
            self.timer_cls = ray.remote(**ray_options(requests["time"]))(TimeActor)
            self.slots += [Slot(i, "time", node_id=nid) for i, nid in enumerate(timers)]
        self.n_timers = sum(1 for s in self.slots if s.role == "time")
        self.native_key: str | None = None
        self.time_queue: collections.deque[tuple[Job, Any]] = collections.deque()
        self.payloads: dict[Any, Any] = {}  # build's record ref -> its artefacts ref
        self.built_halves: dict[str, BuildHalf] = {}  # job id -> what its last finished build measured
        self.inflight: dict[Any, tuple[str, Slot, Job | None]] = {}
        self.tries: dict[str, int] = collections.Counter()
        self.first_start: dict[str, str] = {}
        self.infos: list[dict[str, Any]] = []
        self.last_poll = 0.0
        self.last_place_check = 0.0
        #: monotonic time the first worker became ready and the last record arrived (Ray's fixed start excluded)
        self.first_ready: float | None = None
        self.last_record: float | None = None
        #: the run's jobs (set by :meth:`run`) and the ids of those recorded so far: a failed setup records the rest
        self.jobs: list[Job] = []
        self.recorded: set[str] = set()

    # -- actors ---------------------------------------------------------------------------------------
    def _spawn(self, slot: Slot) -> None:
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

    def _retire(self, slot: Slot) -> None:
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
        """Release every live actor's workspace, then end the actors (the sink is the caller's to close)."""
        close_actors([s.actor for s in self.slots if s.actor is not None and s.ready])
        for s in self.slots:
            self._retire(s)

    # -- the loop -------------------------------------------------------------------------------------
    def _busy(self, slot: Slot) -> bool:
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

    def _check_alive(self, queue: JobQueue) -> None:
        """Raise :class:`DispatchError` when no worker is left for the jobs still to do, or workers wait for a
        node that is gone (checked every :data:`PLACE_CHECK_S`: :func:`kit.dispatch.slots.check_placeable`)."""
        left = len(queue) + len(self.time_queue)
        now = time.monotonic()
        if now - self.last_place_check >= PLACE_CHECK_S:
            self.last_place_check = now
            check_placeable(self.slots, self.cfg, left)
        check_alive(self.slots, self.cfg, left)

    def run(self, jobs: Sequence[Job], progress: Any, bar: Any, tally: StageTally) -> None:
        """Run every job of ``jobs`` to its record (the actors are started by :meth:`start`).

        Raises:
            DispatchError: no worker is left, or the workers are not alike.
            Exception: what a worker's setup raised (:func:`kit.dispatch.slots.setup_error`), after every job
                not recorded yet got a ``harness_error`` record with its cause (:func:`kit.run.plan.record_setup_failure`).
        """
        self.jobs = list(jobs)
        queue = JobQueue(jobs)
        while queue or self.time_queue or self._jobs_inflight():
            self._check_alive(queue)
            self._hand_out(queue)
            if not self.inflight:
                time.sleep(POLL_S)
                continue
            self._poll_stages()
            done, _ = ray.wait(list(self.inflight), num_returns=1, timeout=POLL_S)
            for ref in done:
                self._on_done(ref, queue, tally)
            progress.update(bar, completed=tally.done, status=tally.line(self.running_by_stage(), len(self.time_queue)))

    def _on_done(self, ref: Any, queue: JobQueue, tally: StageTally) -> None:
        kind, slot, job = self.inflight.pop(ref)
        if kind == "ready":
            self._on_ready(ref, slot)
            return
        if kind == "stage":
            try:
                slot.stage = ray.get(ref) if self._busy(slot) else ""
            except Exception:  # noqa: BLE001 - the worker died; its job's ref reports that
                slot.stage = ""
            return
        assert job is not None
        shard = slot.name  # the actor that ran this try (before a replacement renames the slot)
        rec = self._on_result(kind, ref, slot, job, 1 + self.cfg.dispatch.max_retries, queue)
        slot.stage = ""
        # the freed worker gets its next job before the record is written (two fsyncs, ~7 ms a record
        # on 2 cores, that the worker would otherwise wait out)
        self._hand_out(queue)
        if rec is not None:
            self.last_record = time.monotonic()
            self.sink.append(shard, rec)
            self.recorded.add(rec.job_id)
            tally.add(rec)
            log_record(rec)

    def _on_ready(self, ref: Any, slot: Slot) -> None:
        try:
            info = ray.get(ref)
        except ActorUnschedulableError as exc:  # pinned to a node that is gone: this slot is over
            log.warning("worker slot %s%d cannot be placed any more (its node is gone); dropped: %s",
                        slot.role, slot.index, first_lines(str(exc)))
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
            error = setup_error(exc, slot)
            # the jobs running on other workers now are abandoned with the run: they are recorded too
            record_setup_failure(self.jobs, self.recorded, error, self.sink, slot.tag)
            raise error from exc
        self._check_alike(info, slot)
        slot.ready, slot.setup_deaths, slot.name, slot.info = True, 0, info["name"], info
        self.infos.append(info)
        if self.first_ready is None:
            self.first_ready = time.monotonic()
        log.info("worker %s ready on %s (%s, pid %s)", info["name"], info["host"], info["ip"], info["pid"])
        self._note_provenance(slot)
        if slot.role == "build":  # timing workers get the native baseline from a ready build worker
            for t in self.slots:
                if t.role == "time" and t.actor is None and not t.dead:
                    self._spawn(t)

    def _check_alike(self, info: dict[str, Any], slot: Slot) -> None:
        """Raise :class:`DispatchError` when a ready worker runs other kit sources than the driver, or a build
        worker built another native baseline than the first one."""
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

    def _on_result(
        self, kind: str, ref: Any, slot: Slot, job: Job, max_tries: int, queue: JobQueue
    ) -> Record | None:
        tries = self.tries[job.job_id]
        payload = self.payloads.pop(ref, None)
        try:
            rec: Record | BuildHalf = ray.get(ref)
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
            msg = f"worker died on each of {tries} tries; last: {name}: {first_lines(str(exc))}"
            built = self.built_halves.pop(job.job_id, None)
            if kind == "time" and built is not None:
                return timing_lost_record(job, built, tries, msg, name)
            return lost_record(job, tries, Status.WORKER_LOST, msg, name, self.first_start[job.job_id])
        except RayTaskError as exc:  # the job function itself raised (run_job never does for a candidate's fault)
            msg = f"job function raised on {slot.name}: {exc}"
            return lost_record(job, tries, Status.HARNESS_ERROR, msg, slot.name, self.first_start[job.job_id])
        if isinstance(rec, BuildHalf):  # built and verified: its artefacts wait for a timing worker
            assert kind == "build" and payload is not None
            self.built_halves[job.job_id] = rec
            self.time_queue.append((job, payload))
            return None
        self.built_halves.pop(job.job_id, None)
        return rec.model_copy(update={"attempts": tries})

    def _note_provenance(self, slot: Slot) -> None:
        """The session's provenance: the first ready build worker's facts and the dispatch settings, then each
        timing worker's node (informative: a failure to get them is logged, the run goes on)."""
        first_build = slot.role != "time" and not self.notes.started
        if not (first_build or (slot.role == "time" and self.notes.started)):
            return
        try:
            facts = ray.get(slot.actor.provenance.remote(), timeout=120)
        except Exception as exc:  # noqa: BLE001 - provenance is informative; the run goes on
            log.warning("provenance from %s failed: %s", slot.name, exc)
            return
        if slot.role == "time":
            self.notes.timing_worker(facts)
            return
        d = self.cfg.dispatch
        self.notes.start(facts, dispatch=Dispatch(
            mode=d.mode, address=d.address, timing_resource=d.timing_resource, build_resource=d.build_resource,
            workers=len(self.slots) - self.n_timers, first_worker=slot.info))
