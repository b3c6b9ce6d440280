"""The Docker side of the kit's images: the daemon client, the build context, builds, and container runs.

The daemon comes from ``DOCKER_HOST`` (or the default socket).  Building uses the classic builder through the
docker SDK, so ``TARGETARCH`` is passed explicitly; an arm64 image on an x86 host needs qemu binfmt handlers
(see images/README.md).  The docker package is imported only inside the functions that talk to a daemon.
"""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kit.host.machine import normalize_arch
from kit.images.common import APT_PACKAGES, ARCHES, DOCKERFILE, LOCK_PATH, REPO_ROOT, ImageError
from kit.images.lock import ImagePin, Lock, load_lock, write_lock

#: kit sources sent in the build context (relative to the repo root)
_CONTEXT_FILES = ("pyproject.toml", "README.md", "images/Dockerfile", "images/requirements.lock")
_SKIP_NAMES = {"__pycache__", ".git", ".venv", ".nox", "build"}


def client(timeout_s: float = 3600.0):
    """A docker client from the environment (``DOCKER_HOST`` or the default socket).

    Raises:
        ImageError: no daemon answers.
    """
    import docker
    from docker.errors import DockerException

    try:
        c = docker.from_env(timeout=int(timeout_s))
        c.ping()
    except DockerException as exc:
        raise ImageError(
            f"no Docker daemon at {os.environ.get('DOCKER_HOST', 'the default socket')}: {exc}"
        ) from None
    return c


def daemon_available() -> bool:
    """True when a Docker daemon answers a ping (at ``DOCKER_HOST`` or the default socket)."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if host.startswith("unix://") and not Path(host[len("unix://") :]).exists():
        return False
    try:
        client(timeout_s=5).close()
    except (ImageError, ImportError):
        return False
    return True


def _add_tree(
    tf: tarfile.TarFile, src: Path, arcname: str, skip: frozenset[str] = frozenset(_SKIP_NAMES)
) -> None:
    """Add ``src`` as ``arcname``, leaving out entries named in ``skip`` (at any depth) and ``*.pyc``."""

    def keep(ti: tarfile.TarInfo) -> tarfile.TarInfo | None:
        parts = Path(ti.name).parts[1:]
        return None if any(p in skip or p.endswith(".pyc") for p in parts) else ti

    tf.add(src, arcname=arcname, filter=keep)


def _add_empty_dir(tf: tarfile.TarFile, arcname: str) -> None:
    ti = tarfile.TarInfo(arcname)
    ti.type = tarfile.DIRTYPE
    ti.mode = 0o755
    tf.addfile(ti)


def build_context(
    out: Path,
    mnn_dir: Path | None = None,
    extra: Mapping[str, bytes] | None = None,
    ca_cert: Path | None = None,
) -> Path:
    """Write the build context tar ``out``: the kit's sources as ``kit-src/``, ``mnn_dir`` as ``mnn/``.

    Without ``mnn_dir`` the context has an empty ``mnn/`` (build with ``MNN_SOURCE=download``).  ``extra``
    adds files (``{"path/in/context": bytes}``).  ``ca_cert`` (PEM) becomes ``kit-src/images/build-ca.crt``:
    certificates the build trusts for pip and the MNN download (a TLS-intercepting proxy), removed at its end.

    Raises:
        ImageError: ``mnn_dir`` is not an MNN tree (no CMakeLists.txt), ``ca_cert`` is not a PEM file.
    """
    extra = dict(extra or {})
    if ca_cert is not None:
        try:
            pem = Path(ca_cert).read_bytes()
        except OSError as exc:
            raise ImageError(f"--ca-cert {ca_cert}: {exc}") from None
        if b"-----BEGIN CERTIFICATE-----" not in pem:
            raise ImageError(f"--ca-cert {ca_cert}: not a PEM certificate file")
        extra["kit-src/images/build-ca.crt"] = pem
    if mnn_dir is not None and not (Path(mnn_dir) / "CMakeLists.txt").is_file():
        raise ImageError(f"--mnn-dir {mnn_dir}: not an MNN tree (no CMakeLists.txt)")
    with tarfile.open(out, "w") as tf:
        for rel in _CONTEXT_FILES:
            tf.add(REPO_ROOT / rel, arcname=f"kit-src/{rel}")
        _add_tree(tf, REPO_ROOT / "kit", "kit-src/kit")
        if mnn_dir is not None:
            # the whole tree but .git: the image checks its content digest (kit.mnn.source.tree_digest)
            _add_tree(tf, Path(mnn_dir), "mnn", skip=frozenset({".git"}))
        else:
            _add_empty_dir(tf, "mnn")
        for name, data in extra.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mode = 0o644
            tf.addfile(ti, io.BytesIO(data))
    return out


@dataclass(frozen=True)
class ImageBuild:
    """``image_id`` (``sha256:...``), the tag, and the build log (text)."""

    image_id: str
    tag: str
    log: str


def build_image(
    context_tar: Path,
    tag: str,
    dockerfile: str = DOCKERFILE,
    buildargs: Mapping[str, str] | None = None,
    arch: str | None = None,
    network_mode: str | None = "host",
    echo: bool = False,
) -> ImageBuild:
    """Build ``dockerfile`` (a path inside the context) from ``context_tar`` with the classic builder.

    ``arch`` sets the platform (``linux/<arch>``); ``network_mode`` ``host`` lets RUN steps reach package
    registries (None: the daemon's default).  ``echo`` prints the build output as it arrives.

    Raises:
        ImageError: the daemon is unreachable or a build step fails (message: the step's error and log tail).
    """
    c = client()
    lines: list[str] = []
    image_id = ""
    try:
        with open(context_tar, "rb") as f:
            stream = c.api.build(
                fileobj=f,
                custom_context=True,
                dockerfile=dockerfile,
                tag=tag,
                buildargs=dict(buildargs or {}),
                platform=f"linux/{arch}" if arch else None,
                network_mode=network_mode,
                rm=True,
                forcerm=True,
                pull=False,
                decode=True,
            )
            for chunk in stream:
                if "stream" in chunk:
                    lines.append(chunk["stream"])
                    if echo:
                        print(chunk["stream"], end="", flush=True)
                if "aux" in chunk and "ID" in chunk["aux"]:
                    image_id = chunk["aux"]["ID"]
                if "error" in chunk:
                    tail = "".join(lines)[-4000:]
                    raise ImageError(f"building {tag} failed: {chunk['error'].strip()}\n{tail}")
    finally:
        c.close()
    if not image_id:
        raise ImageError(f"building {tag}: the daemon reported no image id\n{''.join(lines)[-4000:]}")
    return ImageBuild(image_id, tag, "".join(lines))


def kit_buildargs(
    lock: Lock, arch: str, base: str | None, skip_mnn_build: bool, mnn_source: str, jobs: int
) -> dict[str, str]:
    """The Dockerfile's build arguments for ``arch`` from the lock (apt pins, base image, MNN pin).

    ``base`` overrides the base image; default: ``base.upstream@upstream_digest`` when the digest is filled,
    else the local base recorded for ``arch``.

    Raises:
        ImageError: no base image known for ``arch``.
    """
    if base is None:
        if lock.base.upstream_digest:
            base = f"{lock.base.upstream}@{lock.base.upstream_digest}"
        elif arch in lock.base.local:
            base = lock.base.local[arch].id
        else:
            raise ImageError(
                f"no base image for {arch}: fill base.upstream_digest in {LOCK_PATH} or make a local base "
                f"(images/make-base.sh {arch}; python -m kit.images base --arch {arch})"
            )
    pins = lock.apt.get(arch, {})
    apt = " ".join(f"{p}={pins[p]}" if p in pins else p for p in APT_PACKAGES)
    return {
        "BASE_IMAGE": base,
        "TARGETARCH": arch,
        "APT_PACKAGES": apt,
        "MNN_SOURCE": mnn_source,
        "MNN_VERSION": lock.mnn.version,
        "MNN_TARBALL_URL": lock.mnn.tarball_url,
        "SKIP_MNN_BUILD": "1" if skip_mnn_build else "0",
        "BUILD_JOBS": str(jobs),
        "DEBIAN_SNAPSHOT": lock.base.snapshot,
    }


@dataclass(frozen=True)
class KitImageOptions:
    """How the kit image is built: its ``tag`` (None: the lock's, else ``mkb-kit:<arch>``), the MNN tree to put
    in (``mnn_dir``; None: downloaded at build time) and whether to build it in the image (``skip_mnn_build``),
    the ``base`` image (None: the lock's), ninja's ``jobs``, and a CA certificate for pip and apt (``ca_cert``)."""

    tag: str | None = None
    mnn_dir: Path | None = None
    skip_mnn_build: bool = False
    base: str | None = None
    jobs: int = 2
    ca_cert: Path | None = None


def build_kit_image(
    arch: str, options: KitImageOptions = KitImageOptions(), lock_path: Path = LOCK_PATH, echo: bool = True,
) -> ImageBuild:
    """Build the kit image for ``arch`` (``amd64``/``arm64``) as ``options`` say and record its id in the lock.

    Needs network for pip (and apt, and MNN unless ``mnn_dir`` is given).

    Raises:
        ImageError: invalid arch or lock, no base image, or a failed build.
    """
    if arch not in ARCHES:
        raise ImageError(f"--arch must be one of {list(ARCHES)}, got {arch!r}")
    o, lock = options, load_lock(lock_path)
    mnn_dir, skip_mnn_build = o.mnn_dir, o.skip_mnn_build
    tag = o.tag or lock.image.get(arch, ImagePin(tag=f"mkb-kit:{arch}")).tag
    args = kit_buildargs(lock, arch, o.base, skip_mnn_build, "context" if mnn_dir else "download", o.jobs)
    with tempfile.TemporaryDirectory(prefix="mkb-image-") as tmp:
        ctx = build_context(Path(tmp) / "context.tar", mnn_dir, ca_cert=o.ca_cert)
        res = build_image(ctx, tag, buildargs=args, arch=arch, echo=echo)
    image = dict(lock.image)
    image[arch] = ImagePin(tag=tag, id=res.image_id, skip_mnn_build=skip_mnn_build)
    write_lock(lock.model_copy(update={"image": image}), lock_path)
    return res


@dataclass(frozen=True)
class ContainerRun:
    """Exit code and combined output (text) of one container run."""

    exit_code: int
    output: str


def run(
    image: str,
    command: Sequence[str] | None = None,
    entrypoint: Sequence[str] | None = None,
    network: str = "none",
    timeout_s: float = 600.0,
) -> ContainerRun:
    """Run ``image`` once (network ``none`` by default) and remove the container.

    Raises:
        ImageError: the daemon is unreachable, the image is missing, or the container outlives ``timeout_s``
            (it is killed).
    """
    from docker.errors import DockerException
    from requests.exceptions import ConnectionError as ReqConnectionError
    from requests.exceptions import ReadTimeout

    c = client(timeout_s=timeout_s + 30)
    container = None
    try:
        container = c.containers.run(
            image,
            command=list(command) if command is not None else None,
            entrypoint=list(entrypoint) if entrypoint is not None else None,
            network_mode=network,
            detach=True,
        )
        try:
            status = container.wait(timeout=timeout_s)
        except (ReadTimeout, ReqConnectionError):
            container.kill()
            raise ImageError(f"{image}: container still running after {timeout_s} s; killed") from None
        out = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
        return ContainerRun(int(status["StatusCode"]), out)
    except DockerException as exc:
        raise ImageError(f"running {image}: {exc}") from None
    finally:
        if container is not None:
            try:
                container.remove(force=True)
            except DockerException:
                pass
        c.close()


def image_info(image: str) -> dict[str, Any]:
    """``id``, ``architecture``, ``labels`` of a local image.

    Raises:
        ImageError: no such image or no daemon.
    """
    from docker.errors import ImageNotFound

    c = client(timeout_s=60)
    try:
        img = c.images.get(image)
    except ImageNotFound:
        raise ImageError(f"image {image} not found in the daemon") from None
    finally:
        c.close()
    return {"id": img.id, "architecture": img.attrs.get("Architecture", ""), "labels": img.labels or {}}


def image_emulated(image: str) -> bool:
    """True when ``image`` would run emulated on this daemon's host (image arch != daemon arch)."""
    c = client(timeout_s=60)
    try:
        host = normalize_arch(c.info().get("Architecture", ""))
    finally:
        c.close()
    return normalize_arch(image_info(image)["architecture"]) != host


