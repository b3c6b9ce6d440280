"""The Ray cluster a run dispatches to: connecting (embedded, ``auto``, ``HOST:PORT``, ``ray://``), the
nodes that carry the custom resources the run places its workers by, how many workers fit, and the check
that every node runs the same kit as the driver.

``mode = "ray"`` with ``dispatch.address`` unset, and ``mode = "processes"`` always, start an embedded Ray
instance on this host (``ray.init(address="local")``: no cluster to start, stopped at the end);
``mode = "ray"`` with an address (``auto``, ``host:6379``, ``ray://head:10001``) joins that cluster
(``ray://`` goes through Ray Client, which needs ``ray[client]``: the kit's ``client`` extra).
If Ray is already initialised in this process, that connection is used and left open.
"""

from __future__ import annotations

import hashlib
import importlib.util
import socket
from pathlib import Path

import ray

from kit.host.proc import reaper
from kit.settings.config import EvalConfig

#: fraction of ``dispatch.timing_resource`` each actor requests (only placement, never a limit)
RESOURCE_FRACTION = 0.01


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


#: the reaper of the embedded Ray this process started (:mod:`kit.host.proc.reaper`)
_REAPER: reaper.Reaper | None = None


def connect(cfg: EvalConfig) -> bool:
    """Initialise Ray for ``cfg.dispatch``; True if this call started it (then :func:`shutdown` it).

    An embedded Ray gets a reaper (:mod:`kit.host.proc.reaper`): should this process die, SIGKILL included, every
    process it started from here on dies with it (Ray's agents otherwise outlive a killed driver)."""
    global _REAPER
    if ray.is_initialized():
        return False
    d = cfg.dispatch
    if d.mode == "processes" or d.address is None:
        _REAPER = reaper.start()
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


def shutdown() -> None:
    """Stop the Ray this process started (:func:`connect`) and end its reaper, which kills what is left."""
    global _REAPER
    ray.shutdown()
    if _REAPER is not None:
        _REAPER.close()
        _REAPER = None


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


def alive_nodes() -> list[dict]:
    return [n for n in ray.nodes() if n.get("Alive")]


def worker_count(cfg: EvalConfig) -> int:
    """``dispatch.workers`` capped by the CPUs of the alive nodes that carry ``dispatch.build_resource``,
    or (when that is None) ``dispatch.timing_resource``.

    Raises:
        DispatchError: no alive node carries the resource(s) or has a CPU.
    """
    d = cfg.dispatch
    nodes = alive_nodes()
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


def actor_requests(cfg: EvalConfig) -> dict[str, dict[str, float]]:
    """The Ray resources each kind of worker asks for, by role: ``job`` (whole jobs) or ``build`` (build halves,
    with ``dispatch.build_resource``) per build worker, and ``time`` per timing worker (only when build and
    timing nodes are apart and timing is on).  The driver places its actors with exactly these; a cluster
    launcher config is checked against them (:mod:`kit.dispatch.launcher`).

    Units: ``CPU`` in Ray CPUs; a custom label as the fraction :data:`RESOURCE_FRACTION` of it (placement only).
    Timing workers reserve no CPU: the node gate keeps timing alone, and a node carrying both labels must still
    place its build workers."""
    d = cfg.dispatch
    split = d.build_resource is not None
    placement = d.build_resource if split else d.timing_resource
    worker: dict[str, float] = {"CPU": 1.0}
    if placement is not None:
        worker[placement] = RESOURCE_FRACTION
    out = {"build" if split else "job": worker}
    if split and cfg.timing.enabled:
        out["time"] = {"CPU": 0.0, d.timing_resource: RESOURCE_FRACTION}
    return out


def timing_nodes(cfg: EvalConfig) -> list[str]:
    """Node ids of the alive nodes that carry ``dispatch.timing_resource`` (one timing worker each).

    Raises:
        DispatchError: none does.
    """
    return sorted(n["NodeID"] for n in _labelled(alive_nodes(), cfg.dispatch.timing_resource, "timing_resource"))
