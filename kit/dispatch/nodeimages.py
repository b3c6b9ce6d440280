"""Which container image each node type of a Ray launcher config runs, and whether that very image is checked.

Ray's rules (``ray/autoscaler/_private/autoscaler.py``: a node type's ``docker`` section updates the global one;
a node type's ``initialization_commands`` replace the global ones; ``docker.py``: the head runs
``docker.head_image``, a worker ``docker.worker_image``, else ``docker.image``; ``commands.py``: the head runs
the global initialization commands):

* the image of node type ``N``: the head's ``docker.head_image`` or ``docker.image``; a worker's
  ``available_node_types.N.docker.worker_image``, else ``docker.worker_image``, else ``docker.image``;
* the initialization commands of ``N``: ``available_node_types.N.initialization_commands`` (a worker's, where
  given), else ``initialization_commands``.

:func:`check_images` asks of every node type that hosts kit workers, and of the head, that one of its
initialization commands runs ``cluster/check-image.sh`` on its image, reading the synced files where Ray puts
them on the host before the container starts, with the lock's architecture (``arm64``/``amd64``) of the node's
machine where that is known: an x86 build node must not start the arm64 image, nor an ARM timing node the amd64
one.  The errors name the field to change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: images/lock.toml's architecture names, by ``platform.machine()`` name
LOCK_ARCH = {"aarch64": "arm64", "x86_64": "amd64"}


class ImageCheckError(Exception):
    """A node type runs an image no initialization command checks, or checks as another architecture's."""


def image_of(prepared: dict[str, Any], name: str) -> tuple[str | None, str]:
    """The image node type ``name`` runs and the dotted field it comes from (None: no docker section)."""
    docker = prepared.get("docker") or {}
    if name == prepared["head_node_type"]:
        for key in ("head_image", "image"):
            if docker.get(key):
                return docker[key], f"docker.{key}"
        return None, "docker.image"
    own = (prepared["available_node_types"][name].get("docker") or {}).get("worker_image")
    if own:
        return own, f"available_node_types.{name}.docker.worker_image"
    for key in ("worker_image", "image"):
        if docker.get(key):
            return docker[key], f"docker.{key}"
    return None, "docker.image"


def init_commands_of(prepared: dict[str, Any], name: str) -> tuple[list[str], str]:
    """The initialization commands node type ``name`` runs and the dotted field they come from."""
    nt = prepared["available_node_types"][name]
    if name != prepared["head_node_type"] and "initialization_commands" in nt:
        return [str(c) for c in nt["initialization_commands"]], f"available_node_types.{name}.initialization_commands"
    return [str(c) for c in prepared.get("initialization_commands", [])], "initialization_commands"


def check_images(path: Path, prepared: dict[str, Any], arches: dict[str, str | None], mounts: str) -> dict[str, str]:
    """Check the image of every node type in ``arches`` (node type -> its machine's architecture, None where
    not known) against its initialization commands (module docstring); ``mounts``: the host folder the
    synced files are under before the container starts.  Returns node type -> image.

    Raises:
        ImageCheckError: names the file, the node type, and the field (image or commands) to change."""
    images: dict[str, str] = {}
    for name, arch in arches.items():
        image, image_field = image_of(prepared, name)
        if image is None:
            continue
        images[name] = image
        cmds, cmds_field = init_commands_of(prepared, name)
        checks = [c for c in cmds if "check-image.sh" in c and image in c.split()]
        if not checks:
            raise ImageCheckError(
                f"{path}: no initialization command runs cluster/check-image.sh on the image of node type {name!r}, "
                f"{image!r} ({image_field}): {cmds_field} must check it against images/lock.toml, or nodes would "
                "run an image that was never checked")
        if not all(mounts in c for c in checks):
            raise ImageCheckError(f"{path}: the check-image.sh command in {cmds_field} must read the synced files "
                                  f"under {mounts} (cluster_name = {prepared['cluster_name']!r}), where Ray puts "
                                  "them on the host")
        want = LOCK_ARCH.get(arch or "")
        if want is not None and not any(c.split()[-1] == want for c in checks):
            got = sorted({c.split()[-1] for c in checks})
            raise ImageCheckError(
                f"{path}: node type {name!r} is {arch} but {cmds_field} checks its image {image!r} ({image_field}) as "
                f"{', '.join(got)}: give it the kit's {want} image and check it as {want}")
    return images
