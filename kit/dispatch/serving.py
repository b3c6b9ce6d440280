"""Ray build workers for ``mkb serve`` (:mod:`kit.serve.engine`) when the config names a Ray cluster: the
service's threads hand their checks, one at a time each, to :class:`~kit.dispatch.actors.JobActor` actors of the
cluster instead of running them in this process.

    RayPlaces(cfg, n).open() → [RayPlace, ...]       connect, start n actors, wait until each is set up
    place.run(job) → Record | None                   one check on the place's actor (None: the pool closed)
    place.session(cfg) → Session                      provenance of the actor's node, for the lane's session
    RayPlaces.close()                                 release the actors' workspaces, end them, stop a Ray it started

What ``mkb eval``'s driver does for a job, a place does for a check: an actor that dies during a check is replaced
and the check tried again, up to ``dispatch.max_retries`` times, then recorded ``worker_lost``; a job function
that raises is a ``harness_error``; ``Record.attempts`` counts the tries; the record's shard is the actor's name
(``n<node>.w<i>``).  A setup that fails raises its own exception (:func:`kit.dispatch.slots.setup_error`), a worker
with other kit sources than the service a :class:`~kit.dispatch.cluster.DispatchError`.  Build and timing nodes
apart (``dispatch.build_resource``) are not served: :class:`RayPlaces` refuses them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import ray
from ray.exceptions import RayActorError, RayTaskError

from kit.dispatch.actors import DEFAULT_JOB, DEFAULT_SETUP, JobActor, JobFn, SetupFn, close_actors
from kit.dispatch.cluster import DispatchError, actor_requests, connect, kit_digest, shutdown, worker_count
from kit.dispatch.slots import Slot, first_lines, ray_options, setup_error
from kit.job.record import Job, lost_record
from kit.results.records import Record, Status
from kit.run.provenance import Dispatch, Session
from kit.settings.config import EvalConfig

log = logging.getLogger("kit")

#: seconds between asking a busy actor for its stage (the driver's STAGE_POLL_S)
STAGE_POLL_S = 1.0


class RayPlaces:
    """The actors of a service (module docstring): ``workers`` of them (None: ``dispatch.workers``), capped by
    the CPUs of the nodes that may take them (:func:`kit.dispatch.cluster.worker_count`).  ``setup_fn`` and
    ``job_fn``: as :class:`kit.dispatch.RayExecutor`'s.

    Raises (constructor):
        kit.dispatch.cluster.DispatchError: ``dispatch.build_resource`` is set (not served)."""

    def __init__(self, cfg: EvalConfig, workers: int | None = None, setup_fn: SetupFn = DEFAULT_SETUP,
                 job_fn: JobFn = DEFAULT_JOB) -> None:
        if cfg.dispatch.build_resource is not None:
            raise DispatchError("dispatch.build_resource: mkb serve runs whole checks on its Ray workers; build "
                                "and timing nodes apart are served by a service per timing node (unset "
                                "build_resource there)")
        if workers is not None:
            cfg = cfg.model_copy(update={"dispatch": cfg.dispatch.model_copy(update={"workers": workers})})
        self.cfg = cfg
        self.setup_fn, self.job_fn = setup_fn, job_fn
        self.kit_digest = kit_digest()
        self.closing = False
        self.places: list[RayPlace] = []
        self._started = False
        self._actor_cls: Any = None

    def open(self) -> list[RayPlace]:
        """Connect to Ray, start the actors and wait until each is set up.  Returns their places.

        Raises:
            kit.dispatch.cluster.DispatchError: no node can take a worker; a worker runs other kit sources;
                every try of a worker's setup died.
            Exception: what a worker's setup raised (:func:`kit.dispatch.slots.setup_error`).
            (the actors started are ended and a Ray this call started is stopped before it raises)"""
        self._started = connect(self.cfg)
        try:
            n = worker_count(self.cfg)
            self._actor_cls = ray.remote(**ray_options(actor_requests(self.cfg)["job"]))(JobActor)
            self.places = [RayPlace(self.cfg, self, i) for i in range(n)]
            for place in self.places:  # all set up at once (each may build a workspace)
                place.spawn()
            for place in self.places:
                place.wait_ready()
        except BaseException:
            self.close()
            raise
        log.info("mkb serve: %d Ray worker(s): %s", n, ", ".join(p.name for p in self.places))
        return list(self.places)

    def dispatch(self) -> Dispatch:
        """The session's dispatch, for ``provenance.json`` (as ``mkb eval``'s driver notes it)."""
        d = self.cfg.dispatch
        first = self.places[0].info if self.places else None
        return Dispatch(mode=d.mode, address=d.address, timing_resource=d.timing_resource, build_resource=None,
                        workers=len(self.places), first_worker=first)

    def close(self) -> None:
        """Release every actor's workspace, end the actors, stop a Ray that :meth:`open` started.  A check still
        running on one is abandoned (its :meth:`RayPlace.run` returns None)."""
        self.closing = True
        close_actors([p.actor for p in self.places if p.actor is not None and p.info])
        for p in self.places:
            p.retire()
        if self._started:
            shutdown()
            self._started = False


@dataclass(eq=False)
class RayPlace:
    """One actor of :class:`RayPlaces`, as a service thread sees it: ``name`` (the shard of its records),
    ``stage`` (of the check running on it), :meth:`run`.  ``cfg``: the config its checks run under (a copy
    with another ``cfg`` shares the actor: :func:`dataclasses.replace`, one per lane of the service)."""

    cfg: EvalConfig
    pool: RayPlaces
    index: int
    stage: str = ""
    #: the actor now, its ``ready`` ref, its name and what it said of itself: shared by the copies of this place
    _slot: dict[str, Any] = field(default_factory=dict)

    @property
    def actor(self) -> Any:
        return self._slot.get("actor")

    @property
    def name(self) -> str:
        return str(self._slot.get("name", f"w{self.index}"))

    @property
    def info(self) -> dict[str, Any]:
        return self._slot.get("info", {})

    def spawn(self) -> None:
        self._slot["info"] = {}
        self._slot["actor"] = self.pool._actor_cls.remote(self.pool.cfg, self.index, self.pool.setup_fn,
                                                          self.pool.job_fn)
        self._slot["ready"] = self.actor.ready.remote()

    def wait_ready(self) -> None:
        """Wait for the actor's setup; an actor that dies meanwhile is replaced (1 + ``dispatch.max_retries``
        tries).  Raises what :meth:`RayPlaces.open` names."""
        for tries in range(1, 2 + self.cfg.dispatch.max_retries):
            try:
                info = ray.get(self._slot["ready"])
                break
            except RayTaskError as exc:
                raise setup_error(exc, Slot(self.index)) from exc
            except RayActorError as exc:
                log.warning("Ray worker slot w%d died during setup (try %d): %s", self.index, tries,
                            first_lines(str(exc)))
                self.retire()
                self.spawn()
        else:
            raise DispatchError(f"dispatch: Ray worker slot w{self.index} died during each of "
                                f"{1 + self.cfg.dispatch.max_retries} setups")
        if info["kit_digest"] != self.pool.kit_digest:
            raise DispatchError(f"worker {info['name']} on {info['host']} ({info['ip']}) runs kit sources "
                                f"{info['kit_digest']}, the service {self.pool.kit_digest}: install the same kit "
                                f"on every node")
        self._slot["info"], self._slot["name"] = info, info["name"]

    def retire(self) -> None:
        if self.actor is not None:
            try:
                ray.kill(self.actor, no_restart=True)
            except Exception as exc:  # noqa: BLE001 - already gone
                log.debug("ray.kill(%s): %s", self.name, exc)
        self._slot["actor"] = None

    def run(self, job: Job) -> Record | None:
        """``job`` run to its record on this place's actor under :attr:`cfg` (module docstring: retries,
        ``worker_lost``, ``harness_error``); None when the pool closed while it ran (the check is not done)."""
        started = datetime.now(UTC).isoformat(timespec="seconds")
        tries = 1 + self.cfg.dispatch.max_retries
        for attempt in range(1, tries + 1):
            if self.pool.closing:
                return None
            ref, name = self.actor.run.remote(job, self.cfg), self.name
            try:
                if not self._wait(ref):
                    return None
                return ray.get(ref).model_copy(update={"attempts": attempt})
            except RayActorError as exc:
                if self.pool.closing:
                    return None
                self.retire()  # one service thread per place: nothing else replaces its actor
                self.spawn()
                self.wait_ready()
                if attempt < tries:
                    log.warning("worker %s died during %s/%s/%s (try %d of %d); retrying", name, job.task.id,
                                job.method, job.sample_id, attempt, tries)
                    continue
                msg = f"worker died on each of {tries} tries; last: {name}: {first_lines(str(exc))}"
                return lost_record(job, tries, Status.WORKER_LOST, msg, name, started)
            except RayTaskError as exc:
                return lost_record(job, attempt, Status.HARNESS_ERROR, f"job function raised on {name}: {exc}",
                                   name, started)
            finally:
                self.stage = ""
        raise AssertionError("unreachable")

    def _wait(self, ref: Any) -> bool:
        """Wait for ``ref``, noting the actor's stage every :data:`STAGE_POLL_S`; False: the pool is closing."""
        while not ray.wait([ref], timeout=STAGE_POLL_S)[0]:
            if self.pool.closing:
                return False
            try:
                self.stage = ray.get(self.actor.stage.remote(), timeout=STAGE_POLL_S)
            except Exception:  # noqa: BLE001 - a slow or dead actor: its job's ref says which
                pass
        return True

    def session(self, cfg: EvalConfig) -> Session:
        """This session's provenance on the actor's node under ``cfg`` (:func:`kit.run.provenance.collect`)."""
        return ray.get(self.actor.provenance.remote(cfg), timeout=120)

    def release(self) -> None:
        """Nothing: :meth:`RayPlaces.close` ends the actors (a service thread's end is not its worker's)."""
