"""Versions of what produced a run: the kit itself (package version, git commit of its checkout) and ONNX
Runtime, the reference.  :mod:`kit.run.provenance` records them per session; :mod:`kit.bundle` puts them into a
bundle's manifest.  No heavy import: ONNX Runtime's version is read from its installed metadata."""

from __future__ import annotations

import functools
from importlib import metadata
from pathlib import Path
from typing import Any

from kit.host import proc

#: the folder above the ``kit`` package: a git checkout when the kit runs from one (editable install, CI)
KIT_ROOT = Path(__file__).resolve().parents[2]


def package_version(name: str) -> str | None:
    """The installed version of distribution ``name`` (``"1.20.1"``), None when it is not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def onnxruntime_version() -> str | None:
    """ONNX Runtime's version (the reference every output is compared with), None when not installed."""
    return package_version("onnxruntime")


@functools.cache
def kit_facts() -> dict[str, Any]:
    """``{"version": str | None, "commit": 40-hex str | None, "dirty": bool | None}``: the kit's package
    version and, when it runs from a git checkout with git on PATH, that checkout's HEAD commit and whether
    tracked files differ from it (None: not a checkout, e.g. an installed wheel or an image without git).
    Cached: one process runs one kit."""
    version = package_version("mobilekernelbench-kit")
    commit = dirty = None
    if (KIT_ROOT / ".git").exists() and proc.which("git"):
        head = proc.run(["git", "-C", str(KIT_ROOT), "rev-parse", "HEAD"], timeout_s=10)
        if head.returncode == 0 and len(head.stdout.strip()) == 40:
            commit = head.stdout.strip()
            status = proc.run(["git", "-C", str(KIT_ROOT), "status", "--porcelain", "--untracked-files=no"],
                              timeout_s=10)
            dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
    return {"version": version, "commit": commit, "dirty": dirty}
