"""Whether the sandbox works here: :func:`bwrap_works` runs bubblewrap once through the kit's subprocess runner,
:func:`resolve` turns ``sandbox.mode`` into sandboxed or not."""

from __future__ import annotations

import functools
import logging

from kit.host import proc, sandbox
from kit.host.sandbox import SandboxError, View, _bwrap_args

log = logging.getLogger("kit")


@functools.cache
def bwrap_works() -> str:
    """"" when bubblewrap runs a command in the kit's sandbox here, else why not (cached per process)."""
    exe = sandbox.bwrap_path()
    if exe is None:
        return "bubblewrap (bwrap) is not installed (Debian: apt-get install bubblewrap)"
    try:
        res = proc.run([exe, *_bwrap_args(View()), "--", "/usr/bin/true"], timeout_s=30)
    except OSError as exc:
        return f"bwrap failed to start: {exc}"
    if res.timed_out:
        return "bwrap did not finish a test command in 30 s"
    if res.returncode != 0:
        return f"bwrap cannot sandbox here (exit {res.returncode}): {res.stderr.strip()[:300]}"
    return ""


def resolve(mode: str) -> bool:
    """Whether commands are sandboxed in ``mode`` (``bwrap``, ``auto``, ``none``).

    Raises:
        SandboxError: ``bwrap`` and bubblewrap does not work here."""
    if mode == "none":
        return False
    why = bwrap_works()
    if not why:
        return True
    if mode == "bwrap":
        raise SandboxError(f"sandbox.mode = \"bwrap\": {why}")
    _warn_once(why)
    return False


@functools.cache
def _warn_once(why: str) -> None:
    log.warning("sandbox.mode = \"auto\": %s; candidate code runs without filesystem, network and PID isolation "
                "(rlimits only). Every record says so (sandboxed = false)", why)
