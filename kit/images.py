"""The kit's pinned Docker images (``images/``): lock file, build, run, and the emulation check.

    python -m kit.images lock                       write images/requirements.lock from this venv
    python -m kit.images base --arch amd64          record the local base image (images/make-base.sh) in the lock
    python -m kit.images build --arch amd64 [--mnn-dir DIR] [--skip-mnn-build]
    python -m kit.images apt --arch amd64           record the apt versions installed in the built image
    python -m kit.images check --arch amd64         `mkb --help` (network none) and every pin installed
    python -m kit.images context ctx.tar [--mnn-dir DIR]   the build context, for a plain docker build

``nox -s images -- ...`` runs the same commands.  The daemon comes from ``DOCKER_HOST`` (or the default
socket).  Building uses the classic builder through the docker SDK, so ``TARGETARCH`` is passed explicitly;
an arm64 image on an x86 host needs qemu binfmt handlers (see images/README.md).

:func:`is_emulated` needs neither Docker nor the docker package; workers call it to flag timings taken under
qemu.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata as md
import io
import json
import os
import platform
import re
import sys
import tarfile
import tempfile
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

REPO_ROOT = Path(__file__).resolve().parents[1]
IMAGES_DIR = REPO_ROOT / "images"
LOCK_PATH = IMAGES_DIR / "lock.toml"
REQUIREMENTS_PATH = IMAGES_DIR / "requirements.lock"
#: the build context's layout (build_context): the kit's sources under kit-src/, the MNN tree under mnn/
DOCKERFILE = "kit-src/images/Dockerfile"
#: the kit's distribution name (pyproject ``[project] name``)
KIT_DIST = "mobilekernelbench-kit"
#: installed in the image besides the kit's runtime dependencies: pytest to run the test suite inside it,
#: setuptools (the kit's build backend, pinned: the kit is installed with --no-build-isolation)
IMAGE_EXTRA_PACKAGES = ("pytest", "pytest-timeout", "setuptools")
ARCHES = ("amd64", "arm64")
_MACHINE_TO_ARCH = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "armv8l": "arm64",
}
#: kit sources sent in the build context (relative to the repo root)
_CONTEXT_FILES = ("pyproject.toml", "README.md", "images/Dockerfile", "images/requirements.lock")
_SKIP_NAMES = {"__pycache__", ".git", ".venv", ".nox", "build"}


class ImageError(Exception):
    """A lock file is invalid, a build fails, or the daemon is unreachable; the message says which."""


# --------------------------------------------------------------------------------------------- emulation


def normalize_arch(machine: str) -> str:
    """``x86_64``/``amd64`` -> ``amd64``, ``aarch64``/``arm64`` -> ``arm64``; anything else lower-cased."""
    return _MACHINE_TO_ARCH.get(machine.lower(), machine.lower())


def cpuinfo_arch(text: str) -> str | None:
    """The architecture of the CPU that ``/proc/cpuinfo`` text describes: ``amd64``, ``arm64`` or None.

    x86 kernels list ``vendor_id``/``cpu family``/``flags``; arm64 kernels list ``CPU implementer``/``Features``.
    qemu-user (as of Debian bookworm's 7.2) passes the host's file through unchanged to an emulated process.
    """
    keys = {line.split(":", 1)[0].strip().lower() for line in text.splitlines() if ":" in line}
    if "vendor_id" in keys and "cpu family" in keys:
        return "amd64"
    if "cpu implementer" in keys and "cpu architecture" in keys:
        return "arm64"
    return None


def is_emulated(machine: str | None = None, cpuinfo: str | None = None) -> bool:
    """True when this process runs under instruction emulation (qemu-user, e.g. an arm64 image on x86).

    Compares the architecture the process is built for (``platform.machine()``) with the CPU the kernel
    reports in ``/proc/cpuinfo``; both can be given for testing.  Returns False when ``/proc/cpuinfo`` is
    unreadable or names no known architecture (no evidence of emulation).  Timings taken when this is True
    must not be scored as speedups.
    """
    mach = normalize_arch(machine if machine is not None else platform.machine())
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return False
    cpu = cpuinfo_arch(cpuinfo)
    return cpu is not None and cpu != mach


# --------------------------------------------------------------------------------------------- lock file


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LocalBase(_Strict):
    """A base image made here by images/make-base.sh (debootstrap minbase + ``docker import``)."""

    image: str
    id: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    debian_version: str
    made_by: str


class BaseSection(_Strict):
    upstream: str = "debian:bookworm-slim"
    #: manifest-list digest of ``upstream`` (``sha256:...``); empty until filled on a networked machine
    upstream_digest: str = Field(default="", pattern=r"^(|sha256:[0-9a-f]{64})$")
    suite: str = "bookworm"
    mirror: str = "http://deb.debian.org/debian"
    #: snapshot.debian.org timestamp (``20261129T000000Z``) for fully reproducible apt installs; empty: live mirror
    snapshot: str = Field(default="", pattern=r"^(|\d{8}T\d{6}Z)$")
    local: dict[str, LocalBase] = Field(default_factory=dict)


class MnnPin(_Strict):
    version: str
    tarball_url: str
    tree_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class PythonPin(_Strict):
    requirements: str = "requirements.lock"
    requirements_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class ImagePin(_Strict):
    tag: str
    #: image id of the last build recorded here (``sha256:...``)
    id: str = Field(default="", pattern=r"^(|sha256:[0-9a-f]{64})$")
    skip_mnn_build: bool = False


class Lock(_Strict):
    """images/lock.toml: every pinned input of the images."""

    schema_version: int = Field(default=1, alias="schema", ge=1, le=1)
    base: BaseSection
    mnn: MnnPin
    python: PythonPin
    #: ``apt.<arch>.<package> = "<version>"``; an arch without entries installs the newest versions
    apt: dict[str, dict[str, str]] = Field(default_factory=dict)
    image: dict[str, ImagePin] = Field(default_factory=dict)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


APT_PACKAGES = ("python3", "python3-venv", "g++", "cmake", "ninja-build", "ccache", "ca-certificates")


def load_lock(path: Path = LOCK_PATH, check_requirements: bool = True) -> Lock:
    """Parse and validate a lock file (and, with ``check_requirements``, the requirements file's sha256).

    Raises:
        ImageError: missing file, invalid TOML, unknown or invalid field (named with the file), an arch that is
            not amd64/arm64, or a requirements file whose sha256 differs from the one recorded.
    """
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ImageError(f"{path}: lock file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ImageError(f"{path}: invalid TOML: {exc}") from None
    try:
        lock = Lock.model_validate(data)
    except ValidationError as exc:
        errs = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ImageError(f"{path}: invalid lock file: {errs}") from None
    for table in ("apt", "image"):
        bad = sorted(set(getattr(lock, table)) - set(ARCHES))
        if bad:
            raise ImageError(f"{path}: [{table}] has unknown architectures {bad}; allowed: {list(ARCHES)}")
    bad = sorted(set(lock.base.local) - set(ARCHES))
    if bad:
        raise ImageError(f"{path}: [base.local] has unknown architectures {bad}; allowed: {list(ARCHES)}")
    req = Path(path).parent / lock.python.requirements
    if not check_requirements:
        return lock
    if not req.is_file():
        raise ImageError(f"{path}: python.requirements: {req} not found")
    got = hashlib.sha256(req.read_bytes()).hexdigest()
    if got != lock.python.requirements_sha256:
        raise ImageError(
            f"{path}: python.requirements_sha256 is {lock.python.requirements_sha256}, {req} has {got}"
        )
    return lock


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a valid TOML basic string
    raise TypeError(f"cannot write {type(v).__name__} to the lock file")


_LOCK_HEADER = """\
# Pinned inputs of the kit's Docker images (images/Dockerfile).  Written by `python -m kit.images`;
# read by kit/images.py, which turns it into build arguments.  See images/README.md.
#
# base.upstream_digest: TO FILL on a machine that reaches Docker Hub (this one reaches none):
#   docker buildx imagetools inspect debian:bookworm-slim --format '{{json .Manifest.Digest}}'
# then build with --base debian:bookworm-slim@<digest>.  base.local.<arch> records the base image made here
# instead (images/make-base.sh: debootstrap --variant=minbase + docker import); its id changes with every run
# of debootstrap, so it identifies what was used, it does not reproduce it.
# base.snapshot: a snapshot.debian.org timestamp makes the apt pins installable forever; empty = live mirror
# (pins of an older point release then fail loudly instead of drifting).
"""


def dump_lock(lock: Lock) -> str:
    """The TOML text of ``lock`` (with the explanatory header)."""
    d = lock.model_dump(by_alias=True)
    out = [_LOCK_HEADER, f"schema = {d['schema']}", ""]

    def table(name: str, values: Mapping[str, Any]) -> None:
        scalars = {k: v for k, v in values.items() if not isinstance(v, dict)}
        if scalars or not values:
            out.append(f"[{name}]")
            out.extend(f"{_key(k)} = {_toml_value(v)}" for k, v in scalars.items())
            out.append("")
        for k, v in values.items():
            if isinstance(v, dict):
                table(f"{name}.{_key(k)}", v)

    for section in ("base", "mnn", "python", "apt", "image"):
        table(section, d[section])
    return "\n".join(out).rstrip() + "\n"


def _key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def write_lock(lock: Lock, path: Path = LOCK_PATH) -> None:
    Path(path).write_text(dump_lock(lock), encoding="utf-8")


def read_requirements(path: Path = REQUIREMENTS_PATH) -> dict[str, str]:
    """``name -> version`` of a ``name==version`` requirements file (names canonical: lower case, ``-``).

    Raises:
        ImageError: a line that is not ``name==version``.
    """
    pins: dict[str, str] = {}
    for n, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)", line)
        if not m:
            raise ImageError(f"{path}:{n}: expected 'name==version', got {raw!r}")
        pins[_canon(m.group(1))] = m.group(2)
    return pins


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def freeze_requirements(roots: Iterable[str] = IMAGE_EXTRA_PACKAGES) -> dict[str, str]:
    """The installed versions of the kit's runtime dependencies and ``roots``, with their whole closure.

    Reads this interpreter's installed distributions (``importlib.metadata``), as ``pip freeze`` would, but
    keeps only what the kit needs (no torch, no dev tools).  Markers are evaluated for this interpreter.

    Raises:
        ImageError: the kit or one of its dependencies is not installed here.
    """
    from packaging.requirements import Requirement

    try:
        kit_reqs = md.requires(KIT_DIST) or []
    except md.PackageNotFoundError:
        raise ImageError(f"{KIT_DIST} is not installed in {sys.prefix}; pip install -e . first") from None
    stack = [Requirement(r) for r in kit_reqs]
    stack = [r for r in stack if r.marker is None or r.marker.evaluate({"extra": ""})]
    stack += [Requirement(r) for r in roots]
    pins: dict[str, str] = {}
    while stack:
        req = stack.pop()
        name = _canon(req.name)
        if name in pins:
            continue
        try:
            dist = md.distribution(req.name)
        except md.PackageNotFoundError:
            raise ImageError(f"{req.name} (needed by the kit) is not installed in {sys.prefix}") from None
        pins[name] = dist.version
        for r in dist.requires or []:
            sub = Requirement(r)
            extras = [""] + sorted(req.extras)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in extras):
                stack.append(sub)
    return dict(sorted(pins.items()))


def write_requirements(pins: Mapping[str, str], path: Path = REQUIREMENTS_PATH) -> str:
    """Write ``name==version`` lines; return the file's sha256."""
    text = (
        "# The image's Python packages: the kit's runtime dependencies (closure) + pytest + setuptools, pinned from the\n"
        "# development venv by `python -m kit.images lock`.  Installed with pip --no-deps, then pip check.\n"
        + "".join(f"{k}=={v}\n" for k, v in sorted(pins.items()))
    )
    Path(path).write_text(text, encoding="utf-8")
    return hashlib.sha256(text.encode()).hexdigest()


# --------------------------------------------------------------------------------------------- docker


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
class BuildResult:
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
) -> BuildResult:
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
    return BuildResult(image_id, tag, "".join(lines))


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


def build_kit_image(
    arch: str,
    tag: str | None = None,
    mnn_dir: Path | None = None,
    skip_mnn_build: bool = False,
    base: str | None = None,
    jobs: int = 2,
    lock_path: Path = LOCK_PATH,
    echo: bool = True,
    ca_cert: Path | None = None,
) -> BuildResult:
    """Build the kit image for ``arch`` (``amd64``/``arm64``) and record its id in the lock.

    Needs network for pip (and apt, and MNN unless ``mnn_dir`` is given).

    Raises:
        ImageError: invalid arch or lock, no base image, or a failed build.
    """
    if arch not in ARCHES:
        raise ImageError(f"--arch must be one of {list(ARCHES)}, got {arch!r}")
    lock = load_lock(lock_path)
    tag = tag or lock.image.get(arch, ImagePin(tag=f"mkb-kit:{arch}")).tag
    args = kit_buildargs(lock, arch, base, skip_mnn_build, "context" if mnn_dir else "download", jobs)
    with tempfile.TemporaryDirectory(prefix="mkb-image-") as tmp:
        ctx = build_context(Path(tmp) / "context.tar", mnn_dir, ca_cert=ca_cert)
        res = build_image(ctx, tag, buildargs=args, arch=arch, echo=echo)
    image = dict(lock.image)
    image[arch] = ImagePin(tag=tag, id=res.image_id, skip_mnn_build=skip_mnn_build)
    write_lock(lock.model_copy(update={"image": image}), lock_path)
    return res


@dataclass(frozen=True)
class RunResult:
    """Exit code and combined output (text) of one container run."""

    exit_code: int
    output: str


def run(
    image: str,
    command: Sequence[str] | None = None,
    entrypoint: Sequence[str] | None = None,
    network: str = "none",
    volumes: Mapping[str, Mapping[str, str]] | None = None,
    environment: Mapping[str, str] | None = None,
    mem_limit: str | None = None,
    timeout_s: float = 600.0,
) -> RunResult:
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
            volumes=dict(volumes or {}),
            environment=dict(environment or {}),
            mem_limit=mem_limit,
            detach=True,
        )
        try:
            status = container.wait(timeout=timeout_s)
        except (ReadTimeout, ReqConnectionError):
            container.kill()
            raise ImageError(f"{image}: container still running after {timeout_s} s; killed") from None
        out = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
        return RunResult(int(status["StatusCode"]), out)
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


@dataclass(frozen=True)
class ImageProbe:
    """What one ``--network none`` run of a kit image reports about itself.

    ``help_exit``/``help_output``: ``mkb --help``; ``packages``: Python distributions (canonical name ->
    version); ``apt``: installed versions of :data:`APT_PACKAGES`; ``env``: the ``MKB_`` environment;
    ``emulated``: :func:`is_emulated` inside the container.
    """

    help_exit: int
    help_output: str
    packages: dict[str, str]
    apt: dict[str, str]
    env: dict[str, str]
    emulated: bool


_PROBE_PY = (
    "import json, os, importlib.metadata as m; from kit.images import is_emulated; "
    "print(json.dumps({'packages': {d.metadata['Name']: d.version for d in m.distributions()}, "
    "'env': {k: v for k, v in os.environ.items() if k.startswith('MKB_')}, 'emulated': is_emulated()}))"
)


def probe_image(image: str, timeout_s: float = 600.0) -> ImageProbe:
    """Run ``image`` once without network and collect :class:`ImageProbe` (one container: with the vfs
    storage driver every container start copies the whole image).

    Raises:
        ImageError: the container fails outside ``mkb --help`` or its report cannot be parsed.
    """
    script = (
        'echo @@help; mkb --help 2>&1; echo "@@help_exit $?"; '
        f'echo @@python; python -c "{_PROBE_PY}" || exit 3; '
        "echo @@apt; dpkg-query -W -f '${Package} ${Version}\\n' " + " ".join(APT_PACKAGES) + " || exit 4"
    )
    res = run(image, ["-c", script], entrypoint=["sh"], network="none", timeout_s=timeout_s)
    if res.exit_code != 0:
        raise ImageError(f"{image}: probe failed with exit code {res.exit_code}: {res.output[-2000:]}")
    try:
        help_part, rest = res.output.split("@@help\n", 1)[1].split("@@help_exit ", 1)
        help_exit, rest = rest.split("\n", 1)
        py_part, apt_part = rest.split("@@python\n", 1)[1].split("@@apt\n", 1)
        data = json.loads(py_part.strip().splitlines()[-1])
        apt = dict(line.split(" ", 1) for line in apt_part.strip().splitlines())
    except (IndexError, ValueError) as exc:
        raise ImageError(f"{image}: cannot parse the probe output ({exc}): {res.output[-2000:]}") from None
    return ImageProbe(
        help_exit=int(help_exit),
        help_output=help_part,
        packages={_canon(k): v for k, v in data["packages"].items()},
        apt=apt,
        env=data["env"],
        emulated=bool(data["emulated"]),
    )


def check_probe(
    probe: ImageProbe, pins: Mapping[str, str], apt_pins: Mapping[str, str] | None = None
) -> list[str]:
    """Problems of a probed image: ``mkb --help`` must exit 0, every pin must be installed at its version.

    Returns a list of messages (empty: the image is good).
    """
    problems = []
    if probe.help_exit != 0 or "usage: mkb" not in probe.help_output:
        problems.append(f"mkb --help exited {probe.help_exit}: {probe.help_output[-500:]}")
    for name, version in pins.items():
        if probe.packages.get(name) != version:
            problems.append(
                f"python {name}: pinned {version}, installed {probe.packages.get(name, 'nothing')}"
            )
    for name, version in (apt_pins or {}).items():
        if probe.apt.get(name) != version:
            problems.append(f"apt {name}: pinned {version}, installed {probe.apt.get(name, 'nothing')}")
    return problems


# --------------------------------------------------------------------------------------------- CLI


def _cmd_lock(args: argparse.Namespace) -> int:
    pins = freeze_requirements()
    if Path(args.lock).exists():
        lock = load_lock(args.lock, check_requirements=False)
    else:
        from kit.config import MNN_TARBALL_URL, MNN_TREE_SHA256, MNN_VERSION

        lock = Lock(
            base=BaseSection(),
            mnn=MnnPin(version=MNN_VERSION, tarball_url=MNN_TARBALL_URL, tree_sha256=MNN_TREE_SHA256),
            python=PythonPin(requirements_sha256="0" * 64),
        )
    req = Path(args.lock).parent / lock.python.requirements
    sha = write_requirements(pins, req)
    write_lock(
        lock.model_copy(update={"python": lock.python.model_copy(update={"requirements_sha256": sha})}),
        args.lock,
    )
    print(f"{req}: {len(pins)} pins (sha256 {sha})")
    return 0


def _cmd_base(args: argparse.Namespace) -> int:
    lock = load_lock(args.lock)
    info = image_info(args.image)
    if normalize_arch(info["architecture"]) != args.arch:
        raise ImageError(f"{args.image} is {info['architecture']}, not {args.arch}")
    deb = run(args.image, ["/etc/debian_version"], entrypoint=["cat"], timeout_s=60).output.strip()
    local = dict(lock.base.local)
    local[args.arch] = LocalBase(
        image=args.image, id=info["id"], debian_version=deb, made_by=f"images/make-base.sh {args.arch}"
    )
    write_lock(lock.model_copy(update={"base": lock.base.model_copy(update={"local": local})}), args.lock)
    print(f"base {args.arch}: {args.image} {info['id']} (Debian {deb})")
    return 0


def _cmd_build(args: argparse.Namespace) -> int:
    res = build_kit_image(
        args.arch,
        args.tag,
        args.mnn_dir,
        args.skip_mnn_build,
        args.base,
        args.jobs,
        args.lock,
        echo=not args.quiet,
        ca_cert=args.ca_cert,
    )
    print(f"built {res.tag} {res.image_id}")
    return 0


def _cmd_context(args: argparse.Namespace) -> int:
    build_context(args.out, args.mnn_dir)
    print(
        f"{args.out}: docker build -f {DOCKERFILE} --build-arg BASE_IMAGE=... --build-arg TARGETARCH=... - < {args.out}"
    )
    return 0


def _cmd_apt(args: argparse.Namespace) -> int:
    lock = load_lock(args.lock)
    tag = args.image or lock.image[args.arch].tag
    versions = probe_image(tag).apt
    apt = dict(lock.apt)
    apt[args.arch] = versions
    write_lock(lock.model_copy(update={"apt": apt}), args.lock)
    print(json.dumps(versions, indent=1))
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    lock = load_lock(args.lock)
    tag = args.image or lock.image[args.arch].tag
    probe = probe_image(tag)
    pins = read_requirements(Path(args.lock).parent / lock.python.requirements)
    problems = check_probe(probe, pins, lock.apt.get(args.arch))
    for p in problems:
        print("PROBLEM:", p)
    verdict = "ok" if not problems else f"{len(problems)} problems"
    print(
        f"{tag}: {verdict}; {len(pins)} Python pins, {len(lock.apt.get(args.arch, {}))} apt pins checked; emulated: {probe.emulated}"
    )
    return 1 if problems else 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m kit.images", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--lock", type=Path, default=LOCK_PATH)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("lock", help="write images/requirements.lock from this venv")
    p = sub.add_parser("base", help="record a local base image in the lock")
    p.add_argument("--arch", choices=ARCHES, required=True)
    p.add_argument("--image", default=None, help="default: mkb-base:bookworm-<arch>")
    p = sub.add_parser("build", help="build the kit image")
    p.add_argument("--arch", choices=ARCHES, default="amd64")
    p.add_argument("--tag", default=None)
    p.add_argument(
        "--mnn-dir", type=Path, default=None, help="MNN tree to copy in (default: download the tarball)"
    )
    p.add_argument(
        "--skip-mnn-build", action="store_true", help="leave out the native MNN build (SKIP_MNN_BUILD=1)"
    )
    p.add_argument("--base", default=None, help="base image (default: from the lock)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--quiet", action="store_true")
    p.add_argument(
        "--ca-cert", type=Path, default=None, help="extra CA certificates (PEM) trusted during the build"
    )
    p = sub.add_parser("context", help="write the build context tar (for a plain docker build)")
    p.add_argument("out", type=Path)
    p.add_argument("--mnn-dir", type=Path, default=None)
    for name in ("apt", "check"):
        p = sub.add_parser(
            name, help="record apt versions of the built image" if name == "apt" else "check a built image"
        )
        p.add_argument("--arch", choices=ARCHES, default="amd64")
        p.add_argument("--image", default=None, help="default: the lock's image.<arch>.tag")
    args = ap.parse_args(argv)
    if args.cmd == "base" and args.image is None:
        args.image = f"mkb-base:bookworm-{args.arch}"
    try:
        return {
            "lock": _cmd_lock,
            "base": _cmd_base,
            "build": _cmd_build,
            "context": _cmd_context,
            "apt": _cmd_apt,
            "check": _cmd_check,
        }[args.cmd](args)
    except ImageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
