"""The container mode of :mod:`kit.host.proc`: while :func:`use` has set a :class:`ContainerTarget`, every command this
process starts runs inside that container (``docker exec`` through the SDK, by the bridge
:mod:`kit.host.proc.dockerexec`), with the same timeouts, rlimits, CPU pinning, sandbox and status mapping as on
the host: :func:`kit.host.proc.spawn._spawn` only puts the bridge in front of the command line it would run.

Paths keep their names: the worker's container mounts what its commands read and write at the same paths
(:mod:`kit.images.container`), so no argument is rewritten, except the kit's own interpreter
(``sys.executable``, e.g. for MNN's ``register.py``), which becomes the image's ``python3``.

The command's session inside the container is *linked* to the bridge's (:func:`linked_sessions`): signalling
the bridge's session (a pause's SIGSTOP/SIGCONT, a timeout's SIGKILL, the kill after every command) signals
both.  This needs the daemon on this host (its processes visible in this /proc), which :mod:`kit.images.container`
checks.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

#: the bridge, run by path with ``python -I`` (it imports nothing of the kit)
BRIDGE = Path(__file__).with_name("dockerexec.py")


@dataclass(frozen=True)
class ContainerTarget:
    """A running container commands are exec'd in: ``container`` (its id), the daemon ``docker_host`` (empty:
    ``DOCKER_HOST`` or the default socket), the interpreter that replaces ``sys.executable`` inside."""

    container: str
    docker_host: str = ""
    python: str = "/usr/bin/python3"


_target: ContainerTarget | None = None
#: bridge pid -> the file where it writes the host pid of the command it exec'd (see kit.host.proc.sessions)
_links: dict[int, Path] = {}
_links_lock = threading.Lock()
_pid_dir: Path | None = None


def use(target: ContainerTarget | None) -> ContainerTarget | None:
    """Run every command of this process in ``target`` from now on (None: on the host again); returns the
    previous target."""
    global _target
    previous, _target = _target, target
    return previous


def current() -> ContainerTarget | None:
    """The container commands run in now (None: the host)."""
    return _target


def bridge_argv(target: ContainerTarget, args: list[str], cwd: str | os.PathLike[str] | None) -> tuple[list[str], Path]:
    """The command line that runs ``args`` in ``target`` from the working directory ``cwd``, and the file the
    bridge will write the command's host pid to (pass it to :func:`link` once the bridge has a pid)."""
    global _pid_dir
    if _pid_dir is None:
        _pid_dir = Path(tempfile.mkdtemp(prefix="mkb-exec-"))
    fd, name = tempfile.mkstemp(dir=_pid_dir, prefix="pid-")
    os.close(fd)
    os.unlink(name)
    inner = [target.python if a == sys.executable else a for a in args]
    workdir = os.fspath(cwd) if cwd is not None else ""
    return [sys.executable, "-I", str(BRIDGE), "exec", target.docker_host, target.container, workdir, name,
            "--", *inner], Path(name)


def link(bridge_pid: int, pidfile: Path) -> None:
    """Signal the command behind the bridge ``bridge_pid`` with the bridge's session from now on."""
    with _links_lock:
        _links[bridge_pid] = pidfile


def unlink(bridge_pid: int) -> None:
    """Forget the link of a bridge whose command has ended (its pid file removed)."""
    with _links_lock:
        path = _links.pop(bridge_pid, None)
    if path is not None:
        path.unlink(missing_ok=True)


def linked_sessions(sid: int) -> list[int]:
    """The sessions inside a container linked to session ``sid`` (its command's host pid; empty: none, or the
    bridge has not reported it yet)."""
    with _links_lock:
        path = _links.get(sid)
    if path is None:
        return []
    try:
        return [int(path.read_text())]
    except (OSError, ValueError):
        return []


def command_pid(pid: int) -> int:
    """The host pid of the command a process ``pid`` of ours runs: the command behind a container bridge (its
    affinity, limits and state are that process's, not the bridge's), else ``pid`` itself."""
    inner = linked_sessions(pid)
    return inner[0] if inner else pid
