"""images/lock.toml: the pinned inputs of the kit's images as pydantic models; load (validated), dump, write."""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ValidationError

from kit.images.common import ARCHES, LOCK_PATH, ImageError
from kit.settings.base import StrictModel
from kit.settings.tomlvalue import toml_value


class LocalBase(StrictModel):
    """A base image made here by images/make-base.sh (debootstrap minbase + ``docker import``)."""

    image: str
    id: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    debian_version: str
    made_by: str


class BaseSection(StrictModel):
    upstream: str = "debian:bookworm-slim"
    #: manifest-list digest of ``upstream`` (``sha256:...``); empty until filled on a networked machine
    upstream_digest: str = Field(default="", pattern=r"^(|sha256:[0-9a-f]{64})$")
    suite: str = "bookworm"
    mirror: str = "http://deb.debian.org/debian"
    #: snapshot.debian.org timestamp (``20261129T000000Z``) for fully reproducible apt installs; empty: live mirror
    snapshot: str = Field(default="", pattern=r"^(|\d{8}T\d{6}Z)$")
    local: dict[str, LocalBase] = Field(default_factory=dict)


class MnnPin(StrictModel):
    version: str
    tarball_url: str
    tree_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class PythonPin(StrictModel):
    requirements: str = "requirements.lock"
    requirements_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class ImagePin(StrictModel):
    tag: str
    #: image id of the last build recorded here (``sha256:...``)
    id: str = Field(default="", pattern=r"^(|sha256:[0-9a-f]{64})$")
    skip_mnn_build: bool = False


class Lock(StrictModel):
    """images/lock.toml: every pinned input of the images."""

    schema_version: int = Field(default=1, alias="schema", ge=1, le=1)
    base: BaseSection
    mnn: MnnPin
    python: PythonPin
    #: ``apt.<arch>.<package> = "<version>"``; an arch without entries installs the newest versions
    apt: dict[str, dict[str, str]] = Field(default_factory=dict)
    image: dict[str, ImagePin] = Field(default_factory=dict)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


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


_toml_value = toml_value


_LOCK_HEADER = """\
# Pinned inputs of the kit's Docker images (images/Dockerfile).  Written by `python -m kit.images`;
# read by kit/images/ (kit.images), which turns it into build arguments.  See images/README.md.
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

