"""The kit's pinned Docker images (``images/``): lock file, build, run, and the emulation check.

* :mod:`kit.images.common`: the images' paths, the architectures, :class:`ImageError`;
* :mod:`kit.images.lock`: images/lock.toml as pydantic models (load, dump, write);
* :mod:`kit.images.requirements`: images/requirements.lock (freeze from this venv, read, write);
* :mod:`kit.images.docker`: the daemon client, the build context, builds, container runs;
* :mod:`kit.images.probe`: what a built image reports about itself, checked against the pins;
* :mod:`kit.images.cli`: ``python -m kit.images lock|base|build|apt|check|context``.

Everything but the CLI is re-exported here.  The host facts (architecture, emulation) live in
:mod:`kit.host.machine`.
"""

from kit.images.common import (
    APT_PACKAGES,
    ARCHES,
    DOCKERFILE,
    IMAGES_DIR,
    LOCK_PATH,
    REPO_ROOT,
    REQUIREMENTS_PATH,
    ImageError,
)
from kit.images.docker import (
    ContainerRun,
    ImageBuild,
    KitImageOptions,
    build_context,
    build_image,
    build_kit_image,
    client,
    daemon_available,
    image_emulated,
    image_info,
    kit_buildargs,
    run,
)
from kit.images.lock import (
    BaseSection,
    ImagePin,
    LocalBase,
    Lock,
    MnnPin,
    PythonPin,
    dump_lock,
    load_lock,
    write_lock,
)
from kit.images.probe import ImageProbe, check_probe, probe_image
from kit.images.requirements import (
    IMAGE_EXTRA_PACKAGES,
    KIT_DIST,
    canonical_name,
    freeze_requirements,
    read_requirements,
    write_requirements,
)

__all__ = [
    "APT_PACKAGES",
    "ARCHES",
    "DOCKERFILE",
    "IMAGES_DIR",
    "IMAGE_EXTRA_PACKAGES",
    "KIT_DIST",
    "LOCK_PATH",
    "REPO_ROOT",
    "REQUIREMENTS_PATH",
    "BaseSection",
    "ImageBuild",
    "ImageError",
    "ImagePin",
    "ImageProbe",
    "LocalBase",
    "Lock",
    "MnnPin",
    "PythonPin",
    "ContainerRun",
    "build_context",
    "build_image",
    "KitImageOptions",
    "build_kit_image",
    "canonical_name",
    "check_probe",
    "client",
    "daemon_available",
    "dump_lock",
    "freeze_requirements",
    "image_emulated",
    "image_info",
    "kit_buildargs",
    "load_lock",
    "probe_image",
    "read_requirements",
    "run",
    "write_lock",
    "write_requirements",
]
