"""Ray cluster launcher configs (the YAML of ``ray up``) checked offline, before any cloud call.

:func:`load_launcher` runs the steps ``ray up`` takes before it contacts the cloud: Ray's own defaults for the
provider (``prepare_config``) and Ray's own schema and cross-field checks (``validate_config``, with
``ray/autoscaler/ray-schema.json``).  :func:`check_launcher` then checks the file against a kit config: every
kind of kit worker (:func:`kit.dispatch.cluster.actor_requests`) has a node type that can host it (the custom
resource label, the CPUs it reserves, a node type that may start), the timing node types' architecture is the
config's ``target.arch`` and the build node types' that or one the kit cross-builds from (x86_64 build nodes
for an aarch64 target; AWS instance types only), the kit image's ``mkb`` entrypoint is overridden, and every
node type runs its own image checked as its architecture (:mod:`kit.dispatch.nodeimages`).
Values still to fill (``REPLACE_ME...``) are listed, not refused; the command line refuses them.

``python -m kit.dispatch.launcher check FILE --config TOML`` checks a file; ``... wait --resource R --nodes N``
(on the head) waits until N alive nodes carry R, since the driver sizes its workers by the nodes alive at
its start.  docs/cloud.md shows both in use.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from kit.dispatch.cluster import actor_requests
from kit.dispatch.nodeimages import ImageCheckError, check_images
from kit.host.target import CROSS_PAIRS
from kit.settings.config import ConfigError, EvalConfig, load_config

#: what marks a value the user must fill before ``ray up``
PLACEHOLDER = "REPLACE_ME"
#: AWS names Graviton (arm64) instance types with a ``g`` after the generation digit: c7g, m7gd, c6gn, t4g, x2gd
_AWS_GRAVITON = re.compile(r"^[a-z]+[0-9]+g[a-z0-9-]*\.")
#: kit config field that names the label each worker role is placed by
_ROLE_FIELD = {"job": "timing_resource", "build": "build_resource", "time": "timing_resource"}
_ROLE_WHAT = {"job": "the workers (build, verify and time)", "build": "the build workers",
              "time": "one timing worker per node"}


class LauncherError(Exception):
    """A launcher config is unreadable, fails Ray's checks, or cannot host the kit config's workers; the message
    names the file and the field (``available_node_types.timing.resources``, ``dispatch.timing_resource``)."""


@dataclass(frozen=True)
class NodeType:
    """One entry of ``available_node_types``, after Ray's defaults: its resources (``CPU`` in Ray CPUs, custom
    labels as counts), how many nodes of it the autoscaler may start, and the AWS instance type if any."""

    name: str
    resources: dict[str, float]
    min_workers: int
    max_workers: int
    head: bool
    instance_type: str | None = None

    def hosts(self, request: dict[str, float]) -> bool:
        """Whether one node of this type can place an actor asking for ``request`` (declared CPUs only)."""
        return all(self.resources.get(k, 0.0) >= v for k, v in request.items())


@dataclass(frozen=True)
class LauncherCheck:
    """What :func:`check_launcher` found: the node types, the node types able to host each worker role
    (``job``, ``build``, ``time``), the architecture of the timing nodes (None: not known for this provider), the
    dotted paths of values still to fill, and remarks that are not errors."""

    path: Path
    node_types: tuple[NodeType, ...]
    hosts: dict[str, list[str]]
    arch: str | None
    placeholders: list[str]
    notes: list[str] = field(default_factory=list)
    #: the architecture of each node type hosting kit workers and of the head (None: not known)
    arches: dict[str, str | None] = field(default_factory=dict)
    #: the container image each of those node types runs (:mod:`kit.dispatch.nodeimages`)
    images: dict[str, str] = field(default_factory=dict)


def load_launcher(path: Path | str) -> dict[str, Any]:
    """Read a launcher YAML and return it as ``ray up`` would use it (Ray's defaults filled in), after Ray's
    schema and cross-field checks.  No network, no cloud call.

    Raises:
        LauncherError: missing file, invalid YAML, not a mapping, or Ray's check failed (the message names
            the file and, for a schema error, the dotted path of the offending value)."""
    from ray.autoscaler._private.util import prepare_config, validate_config

    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LauncherError(f"{p}: launcher config not found") from None
    except yaml.YAMLError as exc:
        raise LauncherError(f"{p}: invalid YAML: {exc}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("provider"), dict):
        raise LauncherError(f"{p}: not a Ray cluster config (a mapping with a `provider` section)")
    try:
        prepared = prepare_config(raw)
        validate_config(prepared)
    except jsonschema.ValidationError as exc:
        where = ".".join(str(x) for x in exc.absolute_path) or "(top level)"
        raise LauncherError(f"{p}: fails Ray's cluster config schema at {where}: {exc.message}") from None
    except (ValueError, KeyError, RuntimeError, AssertionError) as exc:
        raise LauncherError(f"{p}: fails Ray's cluster config checks: {exc}") from None
    return prepared


def node_types(prepared: dict[str, Any]) -> tuple[NodeType, ...]:
    """The node types of a prepared config (:func:`load_launcher`), in file order."""
    head = prepared["head_node_type"]
    out = []
    for name, nt in prepared["available_node_types"].items():
        out.append(NodeType(
            name=name, resources={k: float(v) for k, v in (nt.get("resources") or {}).items()},
            min_workers=int(nt.get("min_workers", 0)), max_workers=int(nt.get("max_workers", 0)), head=name == head,
            instance_type=(nt.get("node_config") or {}).get("InstanceType"),
        ))
    return tuple(out)


def placeholders(value: Any, where: str = "") -> list[str]:
    """Dotted paths of the strings in ``value`` (a parsed YAML document) that still hold :data:`PLACEHOLDER`."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in placeholders(v, f"{where}.{k}" if where else str(k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in placeholders(v, f"{where}[{i}]")]
    return [where] if isinstance(value, str) and PLACEHOLDER in value else []


def _describe(types: tuple[NodeType, ...]) -> str:
    return "; ".join(f"{t.name}: {t.resources}" for t in types)


def _hosts_for(path: Path, cfg: EvalConfig, types: tuple[NodeType, ...]) -> dict[str, list[str]]:
    """Node types able to host each worker role of ``cfg``; raises :class:`LauncherError` for a role none can."""
    hosts: dict[str, list[str]] = {}
    for role, request in actor_requests(cfg).items():
        label = next((k for k in request if k != "CPU"), None)
        fits = [t for t in types if t.hosts(request) and (t.head or t.max_workers > 0)]
        if fits:
            hosts[role] = [t.name for t in fits]
            continue
        if label is None:
            need = f"{request['CPU']:g} CPU for {_ROLE_WHAT[role]} (dispatch.timing_resource is unset)"
        else:
            need = (f"resource {label!r}, which dispatch.{_ROLE_FIELD[role]} places {_ROLE_WHAT[role]} by, "
                    f"with {request['CPU']:g} CPU declared")
        labelled = [t.name for t in types if t.resources.get(label or "CPU", 0) > 0]
        why = (f"; {', '.join(labelled)} may start no node (max_workers = 0)" if labelled and label else "")
        raise LauncherError(f"{path}: no node type in available_node_types offers {need}{why} (node types: "
                            f"{_describe(types)}); add \"{label or 'CPU'}\": 1 to the resources of a node type "
                            f"(and declare its CPU)")
    return hosts


def _arches(prepared: dict[str, Any], types: tuple[NodeType, ...]) -> dict[str, str | None]:
    """The architecture (``aarch64``/``x86_64``) of each node type, from its AWS instance type; None elsewhere."""
    aws = prepared["provider"].get("type") == "aws"
    return {t.name: (("aarch64" if _AWS_GRAVITON.match(t.instance_type or "") else "x86_64") if aws else None)
            for t in types}


def _check_arches(path: Path, cfg: EvalConfig, hosts: dict[str, list[str]], types: tuple[NodeType, ...],
                  arches: dict[str, str | None]) -> str | None:
    """The timing nodes' architecture (None: not known): the node types that time (roles ``job``, ``time``) must
    all be ``target.arch`` (the kit scores no emulated timing); those that only build (``build``) may also be a
    host the kit cross-builds from (:data:`kit.host.target.CROSS_PAIRS`: x86_64 build nodes for an aarch64 target).

    Raises:
        LauncherError: names the node types, their instance types and ``target.arch``."""
    by_name = {t.name: t for t in types}
    timing = sorted({n for role in ("job", "time") for n in hosts.get(role, []) if arches.get(n)})
    found = {arches[n] for n in timing}
    if len(found) > 1:
        raise LauncherError(f"{path}: the node types that time kit jobs mix architectures: "
                            f"{ {n: arches[n] for n in timing} } (timings of one run come from one architecture)")
    arch = next(iter(found), None)
    target = cfg.target.arch
    if arch is not None and arch != target:
        raise LauncherError(
            f"{path}: the node types timing kit jobs ({', '.join(f'{n}: {by_name[n].instance_type}' for n in timing)}) "
            f"are {arch}, but target.arch = {target!r} in the kit config: set [target] arch = \"{arch}\" or give "
            f"them {target} instance types (timings under emulation are never scored)")
    for n in hosts.get("build", []):
        a = arches.get(n)
        if a is not None and a != target and (a, target) not in CROSS_PAIRS:
            pairs = ", ".join(f"{h} -> {t}" for h, t in sorted(CROSS_PAIRS))
            raise LauncherError(
                f"{path}: build node type {n!r} ({by_name[n].instance_type}) is {a} and cannot build for target.arch "
                f"= {target!r}: the kit builds natively or cross-builds {pairs} (available_node_types.{n}."
                "node_config.InstanceType)")
    return arch


def _check_docker(path: Path, prepared: dict[str, Any], arches: dict[str, str | None]) -> dict[str, str]:
    """A ``docker`` section needs the entrypoint override, and every node type in ``arches`` an initialization
    command that runs ``check-image.sh`` on its own image as its architecture (:mod:`kit.dispatch.nodeimages`).
    Returns node type -> image."""
    docker = prepared.get("docker") or {}
    if not any(docker.get(k) for k in ("image", "head_image", "worker_image")):
        return {}
    if not any(str(o).startswith("--entrypoint") for o in docker.get("run_options", [])):
        raise LauncherError(f"{path}: docker.run_options needs --entrypoint= : the kit image's ENTRYPOINT is "
                            "`mkb`, and Ray starts the container with the command `bash`")
    from ray.autoscaler.sdk import get_docker_host_mount_location

    # before the container starts, the file mounts are on the host under a folder named after the cluster
    mounts = get_docker_host_mount_location(prepared["cluster_name"]) + "/"
    try:
        return check_images(path, prepared, arches, mounts)
    except ImageCheckError as exc:
        raise LauncherError(str(exc)) from None


def check_launcher(path: Path | str, cfg: EvalConfig) -> LauncherCheck:
    """Check the launcher config at ``path`` against the kit config ``cfg`` (module docstring).

    Raises:
        LauncherError: Ray's checks fail (:func:`load_launcher`); no node type can host a worker role of ``cfg``
            (names the resource, the ``dispatch`` field and the node types with their resources); the hosting
            node types' architecture is not ``target.arch``; a ``docker.image`` without an entrypoint override."""
    p = Path(path)
    prepared = load_launcher(p)
    types = node_types(prepared)
    hosts = _hosts_for(p, cfg, types)
    all_arches = _arches(prepared, types)
    used = {t.name: all_arches[t.name] for t in types if t.head or any(t.name in names for names in hosts.values())}
    arch = _check_arches(p, cfg, hosts, types, used)
    images = _check_docker(p, prepared, used)
    notes = []
    cross = sorted(n for n in hosts.get("build", []) if used.get(n) not in (None, cfg.target.arch))
    if cross:
        notes.append(f"node types {cross} cross-build for {cfg.target.arch} and ship to the timing nodes")
    if "time" in hosts:
        both = [n for n in hosts["time"] if n in hosts.get("build", [])]
        if both:
            notes.append(f"node types {both} carry both labels: builds run beside timing there (paused during it)")
    return LauncherCheck(p, types, hosts, arch, placeholders(yaml.safe_load(p.read_text(encoding="utf-8"))), notes,
                         arches=used, images=images)


def wait_for_nodes(resource: str, nodes: int, timeout_s: float, address: str = "auto") -> int:
    """Join the cluster at ``address`` and wait until ``nodes`` alive nodes carry ``resource``; returns how many
    do.  Raises :class:`LauncherError` after ``timeout_s`` seconds with fewer."""
    import ray

    ray.init(address=address, logging_level="ERROR")
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            have = sum(1 for n in ray.nodes() if n.get("Alive") and n["Resources"].get(resource, 0) > 0)
            if have >= nodes:
                return have
            if time.monotonic() > deadline:
                raise LauncherError(f"{have} of {nodes} nodes carrying {resource!r} joined within {timeout_s:g} s")
            time.sleep(5.0)
    finally:
        ray.shutdown()


def main(argv: list[str] | None = None) -> int:
    """``check FILE --config TOML [--allow-placeholders]`` or ``wait --resource R --nodes N``; exit 0 when
    fine, 2 with the reason on stderr."""
    ap = argparse.ArgumentParser(prog="python -m kit.dispatch.launcher", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    chk = sub.add_parser("check", help="check a launcher YAML against Ray's schema and a kit config")
    chk.add_argument("file", type=Path)
    chk.add_argument("--config", type=Path, required=True, help="the kit config the cluster will run")
    chk.add_argument("--allow-placeholders", action="store_true", help=f"pass with {PLACEHOLDER}... values left")
    wt = sub.add_parser("wait", help="on the head: wait until N alive nodes carry a resource")
    wt.add_argument("--resource", required=True)
    wt.add_argument("--nodes", type=int, required=True)
    wt.add_argument("--timeout-s", type=float, default=900.0)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "wait":
            print(f"{wait_for_nodes(args.resource, args.nodes, args.timeout_s)} nodes carry {args.resource!r}")
            return 0
        logging.getLogger("ray.autoscaler").setLevel(logging.WARNING)  # Ray's INFO lines on filling defaults
        cfg = load_config(args.config)
        res = check_launcher(args.file, cfg)
    except (LauncherError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for role, names in res.hosts.items():
        print(f"{role} workers {actor_requests(cfg)[role]} -> node types {names}")
    print(f"architecture: {res.arch or 'not known for this provider'}")
    for name, image in res.images.items():
        print(f"node type {name} ({res.arches.get(name) or 'architecture not known'}) runs {image}")
    for note in res.notes:
        print(f"note: {note}")
    if res.placeholders:
        print(f"to fill before `ray up`: {', '.join(res.placeholders)}",
              file=sys.stdout if args.allow_placeholders else sys.stderr)
        if not args.allow_placeholders:
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
