"""One worker's container (``container.mode = "docker"``): started once for the worker's life, every command of
the worker exec'd in it (:mod:`kit.host.proc.containermode`), removed with its volume when the worker ends, however.

The container (Docker SDK):

* the pinned image, checked against the lock (:func:`check_image`): another id is refused unless
  ``container.allow_image_mismatch``;
* ``network_mode = "none"``; the image's root filesystem read-only; ``/tmp`` and ``$HOME`` tmpfs
  (``container.tmp_mb``);
* the kit cache (``mnn.cache_dir``: trees, workspaces, native baselines, scratch, ccache) as a volume named
  after the run and the worker (``mkb-<run>-<worker>-<pid>``; a local volume bound to the host folder),
  writable, at its own path;
* read-only at their own paths: the task folder, the candidate sources, the kit's package (the runner's C++
  sources) and ``container.ro_paths``;
* ``nano_cpus``, ``mem_limit`` (= ``memswap_limit``) and ``pids_limit`` from ``[container]``; Docker's default
  seccomp profile and capabilities; ``init`` (reaps what a candidate orphans); command ``sleep infinity``;
* a reaper (``kit/host/proc/dockerexec.py reap``) that removes container and volume once the worker process is
  gone (SIGKILL included).

Bubblewrap is not used inside: with Docker's default seccomp profile ``unshare`` of user, network and PID
namespaces is refused (EPERM, measured with Docker 20.10), and unconfined it still cannot mount ``/proc``.
The container is the candidate's sandbox; the rlimits of :mod:`kit.host.sandbox` still apply to every command.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.host import proc
from kit.host.machine import normalize_arch
from kit.host.proc import containermode as pcontainer
from kit.images.common import LOCK_PATH, ImageError
from kit.images.lock import load_lock
from kit.images.seed import seed_cache

log = logging.getLogger("kit")

#: the interpreter inside the kit image (the image's venv: the same packages as the kit's)
IMAGE_PYTHON = "/opt/venv/bin/python"
#: label keys on every container and volume of the kit
RUN_LABEL, WORKER_LABEL, OWNER_LABEL = "org.mobilekernelbench.run", "org.mobilekernelbench.worker", \
    "org.mobilekernelbench.owner-pid"


class ImageMismatch(ImageError):
    """The image to evaluate in is not the one the lock file pins (and ``allow_image_mismatch`` is false)."""


@dataclass(frozen=True)
class ImageCheck:
    """What :func:`check_image` found: the ``image`` asked for, its ``id`` in the daemon, the lock's ``lock_id``
    for that architecture ("" when the lock has none) and whether they are equal."""

    image: str
    id: str
    lock_id: str
    arch: str

    @property
    def matches_lock(self) -> bool:
        return bool(self.lock_id) and self.id == self.lock_id

    def provenance(self) -> dict[str, Any]:
        """The provenance entry (``container`` key of ``provenance.json``)."""
        return {"mode": "docker", "image": self.image, "image_id": self.id, "lock_image_id": self.lock_id,
                "matches_lock": self.matches_lock, "arch": self.arch}


def _client(docker_host: str, timeout_s: float = 600.0):
    import docker
    from docker.errors import DockerException

    try:
        c = docker.DockerClient(base_url=docker_host, timeout=int(timeout_s)) if docker_host else \
            docker.from_env(timeout=int(timeout_s))
        c.ping()
    except DockerException as exc:
        where = docker_host or os.environ.get("DOCKER_HOST", "the default socket")
        raise ImageError(f"container.mode = \"docker\": no Docker daemon at {where}: {exc}") from None
    return c


def check_image(image: str, docker_host: str = "", lock_file: Path | None = None, allow_mismatch: bool = False,
                arch: str | None = None) -> ImageCheck:
    """Resolve ``image`` (empty: the lock's ``image.<arch>.tag``) in the daemon and compare its id with the lock.

    Raises:
        ImageError: no daemon, no such image, or an invalid lock file.
        ImageMismatch: the ids differ (or the lock pins none) and ``allow_mismatch`` is false."""
    arch = arch or normalize_arch(os.uname().machine).replace("x86_64", "amd64").replace("aarch64", "arm64")
    lock_path = Path(lock_file) if lock_file is not None else LOCK_PATH
    lock = load_lock(lock_path, check_requirements=False)
    pin = lock.image.get(arch)
    name = image or (pin.tag if pin is not None else "")
    if not name:
        raise ImageError(f"container.image is empty and {lock_path} has no [image.{arch}]")
    c = _client(docker_host)
    try:
        from docker.errors import ImageNotFound

        try:
            got = c.images.get(name).id
        except ImageNotFound:
            raise ImageError(f"container.image {name!r}: no such image in the daemon (build it: nox -s images)") \
                from None
    finally:
        c.close()
    check = ImageCheck(name, got, pin.id if pin is not None else "", arch)
    if not check.matches_lock and not allow_mismatch:
        raise ImageMismatch(
            f"container.image {name!r} is {got}, but {lock_path} pins image.{arch}.id = {check.lock_id or '(none)'}: "
            "refusing to evaluate in an image the lock does not pin (rebuild it with nox -s images, or set "
            "container.allow_image_mismatch = true: every record then carries the image id it ran in)")
    if not check.matches_lock:
        log.warning("container.allow_image_mismatch: evaluating in %s (%s), not the lock's %s", name, got,
                    check.lock_id or "(none)")
    return check


def volume_name(run: str, worker: str) -> str:
    """``mkb-<run>-<worker>-<pid>`` with Docker's allowed characters."""
    raw = f"mkb-{run}-{worker}-{os.getpid()}"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", raw)[:200]


@dataclass
class WorkerContainer:
    """A started worker container: its id, the volume, the check of its image, the reaper process."""

    id: str
    volume: str
    image: ImageCheck
    docker_host: str
    start_s: float
    _reaper: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _previous: pcontainer.ContainerTarget | None = field(default=None, repr=False)

    def activate(self) -> None:
        """Run this process's commands in the container from now on (:func:`kit.host.proc.containermode.use`)."""
        self._previous = pcontainer.use(pcontainer.ContainerTarget(self.id, self.docker_host, IMAGE_PYTHON))

    def remove(self) -> None:
        """Commands on the host again; the container and its volume removed (the reaper ends with them)."""
        pcontainer.use(self._previous)
        c = _client(self.docker_host, 120)
        try:
            for call, arg in ((c.api.remove_container, self.id), (c.api.remove_volume, self.volume)):
                try:
                    call(arg, force=True)
                except Exception as exc:  # noqa: BLE001 - removed already (the reaper): said, not fatal
                    log.debug("removing %s: %s", arg, exc)
        finally:
            c.close()
        if self._reaper is not None:
            self._reaper.kill()
            self._reaper.wait()


def _mounts(cache_dir: Path, ro_paths: list[Path]) -> dict[str, dict[str, str]]:
    out = {}
    for p in dict.fromkeys(Path(os.path.abspath(q)) for q in ro_paths):
        if p.exists() and not str(p).startswith(str(cache_dir)):
            out[str(p)] = {"bind": str(p), "mode": "ro"}
    return out


@dataclass(frozen=True)
class ContainerLimits:
    """What a worker's container may use: ``cpus`` (CPU time, in cores), ``memory_mb`` (memory and swap),
    ``pids`` (processes), ``tmp_mb`` (each tmpfs: /tmp and HOME), and ``start_timeout_s`` (seconds to start)."""

    cpus: float = 2.0
    memory_mb: int = 8192
    pids: int = 4096
    tmp_mb: int = 1024
    start_timeout_s: float = 900.0


def start_worker_container(
    *, image: ImageCheck, cache_dir: Path, ro_paths: list[Path], run: str, worker: str, docker_host: str = "",
    limits: ContainerLimits = ContainerLimits(),
) -> WorkerContainer:
    """Start the worker's container (see the module docstring), wait until it runs, check that the daemon's
    processes are this host's (the bridge signals them from here), and start its reaper.

    Raises:
        ImageError: the daemon refuses, the container does not start within ``limits.start_timeout_s`` seconds,
            or the daemon runs on another host."""
    cpus, memory_mb, pids, tmp_mb = limits.cpus, limits.memory_mb, limits.pids, limits.tmp_mb
    start_timeout_s = limits.start_timeout_s
    cache_dir = Path(os.path.abspath(cache_dir))
    cache_dir.mkdir(parents=True, exist_ok=True)
    # the bridge and the reaper run with the commands' environment, which has no DOCKER_HOST: pass it on
    docker_host = docker_host or os.environ.get("DOCKER_HOST", "")
    vol = volume_name(run, worker)
    labels = {RUN_LABEL: run, WORKER_LABEL: worker, OWNER_LABEL: str(os.getpid())}
    c = _client(docker_host, start_timeout_s + 60)
    t0 = time.monotonic()
    ct = None
    try:
        seed_cache(c, image.id, cache_dir)  # the image's baseline and ccache, where the paths allow
        c.volumes.create(vol, driver="local", labels=labels,
                         driver_opts={"type": "none", "o": "bind", "device": str(cache_dir)})
        volumes = {vol: {"bind": str(cache_dir), "mode": "rw"}, **_mounts(cache_dir, ro_paths)}
        home = os.environ.get("HOME", "/root")
        ct = c.containers.run(
            image.id, ["sleep", "infinity"], entrypoint=[], detach=True, init=True, network_mode="none",
            read_only=True, tmpfs={"/tmp": f"size={tmp_mb}m", home: f"size={tmp_mb}m"}, volumes=volumes,
            nano_cpus=int(cpus * 1e9) if cpus else None, mem_limit=f"{memory_mb}m", memswap_limit=f"{memory_mb}m",
            pids_limit=pids, labels=labels, name=vol, working_dir=str(cache_dir),
        )
        ct.reload()
        pid = int(ct.attrs["State"].get("Pid") or 0)
        if not ct.attrs["State"].get("Running") or not pid:
            raise ImageError(f"container {vol} did not start: {ct.attrs['State']}")
        if not _same_host(pid, ct.id):
            raise ImageError("container.mode = \"docker\" needs the daemon on this host (its processes are "
                             f"signalled from here); {docker_host or 'DOCKER_HOST'} runs them elsewhere")
    except Exception as exc:
        _cleanup(c, ct, vol)
        c.close()
        if isinstance(exc, ImageError):
            raise
        raise ImageError(f"starting the worker container from {image.image}: {exc}") from None
    c.close()
    reaper = proc.detach([sys.executable, "-I", str(pcontainer.BRIDGE), "reap", docker_host, str(os.getpid()), ct.id,
                          vol])
    return WorkerContainer(ct.id, vol, image, docker_host, time.monotonic() - t0, reaper)


def _same_host(pid: int, container_id: str) -> bool:
    """True when host pid ``pid`` is this container's init here (its cgroup names the container)."""
    try:
        return container_id in Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return False


def _cleanup(c: Any, ct: Any, vol: str) -> None:
    for call, arg in ((c.api.remove_container, ct.id if ct is not None else None), (c.api.remove_volume, vol)):
        if arg is None:
            continue
        try:
            call(arg, force=True)
        except Exception:  # noqa: BLE001 - best effort after a failed start
            pass


def leftovers(run: str, docker_host: str = "") -> tuple[list[str], list[str]]:
    """Names of the containers and volumes labelled with ``run`` that still exist (empty when a run cleaned up)."""
    c = _client(docker_host, 60)
    try:
        flt = {"label": f"{RUN_LABEL}={run}"}
        cts = [x.name for x in c.containers.list(all=True, filters=flt)]
        vols = [v.name for v in c.volumes.list(filters=flt)]
    finally:
        c.close()
    return cts, vols
