"""The worker slots of the driver (:mod:`kit.dispatch.driver`): what it knows of each actor (:class:`Slot`), the
Ray options an actor is made with (:func:`ray_options`), whether the run can still go on with the slots left
(:func:`check_placeable`, :func:`check_alive`), and what a worker's failed setup raises (:func:`setup_error`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ray.exceptions import RayTaskError

from kit.dispatch.cluster import DispatchError, alive_nodes
from kit.settings.config import EvalConfig

log = logging.getLogger("kit")


@dataclass
class Slot:
    """One worker place of the run: the actor in it now (None: none yet, or retired) and what the driver knows
    of it."""

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
    last_task: str | None = None  # task id of the last job handed to this worker (kit.run.queue affinity)

    @property
    def tag(self) -> str:
        """The slot's short name before its worker has one: ``w<index>``, ``t<index>`` for a timing slot."""
        return f"{'t' if self.role == 'time' else 'w'}{self.index}"


def ray_options(request: dict[str, float]) -> dict[str, Any]:
    """``ray.remote`` options of an actor asking for ``request`` (:func:`kit.dispatch.cluster.actor_requests`);
    a second thread per actor answers stage() while a job runs (the driver never sends two jobs)."""
    custom = {k: v for k, v in request.items() if k != "CPU"}
    opts: dict[str, Any] = {"num_cpus": request["CPU"], "max_restarts": 0, "max_concurrency": 2}
    if custom:
        opts["resources"] = custom
    return opts


def check_placeable(slots: Sequence[Slot], cfg: EvalConfig, left: int) -> None:
    """Raise :class:`DispatchError` when workers wait to start but no alive node can take them (their node died
    and none other carries the resource): Ray would wait for such a node forever (``left``: jobs still to do)."""
    if not any(s.actor is not None and not s.ready and not s.dead for s in slots):
        return
    d = cfg.dispatch
    nodes = alive_nodes()
    split = d.build_resource is not None
    field_name, res = ("build_resource", d.build_resource) if split else ("timing_resource", d.timing_resource)
    workers_ok = any(n["Resources"].get("CPU", 0) > 0 and (res is None or n["Resources"].get(res, 0) > 0)
                     for n in nodes)
    if not workers_ok and not any(s.ready for s in slots if s.role != "time"):
        raise DispatchError(f"dispatch.{field_name}: no alive node with a CPU carries {res!r} any more and no "
                            f"worker is left ({left} jobs left; rerun to resume when nodes are back)")


def check_alive(slots: Sequence[Slot], cfg: EvalConfig, left: int) -> None:
    """Raise :class:`DispatchError` when no worker is left for the jobs still to do (``left`` of them): no build
    (or whole-job) worker, or, with timing workers, no timing worker."""
    if all(s.dead for s in slots if s.role != "time"):
        raise DispatchError(f"dispatch: every worker died during setup ({left} jobs left; rerun to resume)")
    timers = [s for s in slots if s.role == "time"]
    if timers and all(s.dead for s in timers):
        raise DispatchError(
            f"dispatch.timing_resource: no timing worker is left on the nodes carrying "
            f"{cfg.dispatch.timing_resource!r} (they died during setup or their node is gone; "
            f"{left} jobs left; rerun to resume)"
        )


def setup_error(exc: RayTaskError, slot: Slot) -> BaseException:
    """The exception a worker's setup raised, as it raised it (what ``ray.get`` raises is Ray's wrapper:
    an instance of the same type, but its message is the remote traceback), noted with the worker it came
    from; the wrapper itself when Ray could not ship the original."""
    cause = getattr(exc, "cause", None)
    if not isinstance(cause, Exception) or isinstance(cause, RayTaskError):
        return exc
    where = f"worker slot {slot.tag}"
    # the wrapper's first line: "ray::_JobActor.ready() (pid=..., ip=..., ...)"
    at = re.search(r"\(pid=(\d+), ip=([^,)]+)", str(exc))
    if at:
        where += f" (pid {at[1]} on {at[2]})"
    log.info("the setup of %s failed; ending the run", where)
    cause.add_note(f"raised by the setup of Ray {where}")
    return cause


def first_lines(text: str, n: int = 3) -> str:
    """The first ``n`` lines of ``text``, stripped, on one line (`` | `` between them)."""
    return " | ".join(line.strip() for line in text.strip().splitlines()[:n])
