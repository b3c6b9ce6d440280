"""images/requirements.lock: the image's Python packages, frozen from this venv, read and written."""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from kit.images.common import REQUIREMENTS_PATH, ImageError

#: the kit's distribution name (pyproject ``[project] name``)
KIT_DIST = "mobilekernelbench-kit"
#: installed in the image besides the kit's runtime dependencies: pytest to run the test suite inside it,
#: setuptools (the kit's build backend, pinned: the kit is installed with --no-build-isolation)
IMAGE_EXTRA_PACKAGES = ("pytest", "pytest-timeout", "setuptools")


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
        pins[canonical_name(m.group(1))] = m.group(2)
    return pins


def canonical_name(name: str) -> str:
    """A distribution name in canonical form: lower case, each run of ``-``, ``_``, ``.`` -> ``-`` (PEP 503)."""
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
        name = canonical_name(req.name)
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

