"""The ``[container]`` section: where a worker's build, verification and timing commands run (on this host, or
inside the pinned Docker image; :mod:`kit.images.container`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from kit.settings.base import Section


class ContainerSection(Section):
    """``mode = "docker"``: each worker starts one container of the pinned image for its life (no network, the
    image's root filesystem read-only, the kit cache as a writable volume named after the run, the task and
    candidate folders read-only) and every command it runs through :mod:`kit.host.proc` is exec'd in it."""

    #: ``host``: commands run on this host; ``docker``: inside the pinned image
    mode: Literal["host", "docker"] = "host"
    #: image tag or id (empty: ``image.<arch>.tag`` of the lock file)
    image: str = ""
    #: the lock file the image is checked against (None: the kit's ``images/lock.toml``)
    lock_file: Path | None = None
    #: evaluate in an image whose id differs from the lock's ``image.<arch>.id`` (recorded in every record)
    allow_image_mismatch: bool = False
    #: the daemon (``unix:///run/docker.sock``; empty: ``DOCKER_HOST`` or the default socket)
    docker_host: str = ""
    #: CPUs one worker's container may use (Docker ``nano_cpus``; 0: no limit)
    cpus: float = Field(default=2.0, ge=0)
    #: memory of one worker's container, MiB (its cgroup; the OOM killer ends a command beyond it)
    memory_mb: int = Field(default=8192, ge=256)
    #: processes of one worker's container at once (its pids cgroup)
    pids: int = Field(default=4096, ge=64)
    #: size of the container's /tmp and $HOME (tmpfs, MiB each)
    tmp_mb: int = Field(default=1024, ge=16)
    #: seconds to wait for a container to start (the vfs storage driver copies the whole image: minutes)
    start_timeout_s: float = Field(default=900.0, gt=0)
    #: further host folders mounted read-only at their own path
    ro_paths: list[Path] = Field(default_factory=list)
