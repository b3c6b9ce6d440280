"""How a process that runs or compiles candidate code is confined.

Candidates are LLM output: every command that runs their code (the runner, the candidate's converter) or
compiles it (ninja, cmake, the compiler) goes through :func:`kit.host.proc.run` with a :class:`Confinement`:

* **rlimits** (:class:`Limits`, set by the kit's launcher, :mod:`kit.host.proc.launch`, or util-linux ``prlimit``): address space, CPU seconds, file size, open
  files, processes (counted on top of the user's processes running now: RLIMIT_NPROC counts every process of
  the user, and the kit runs as one user).  The kernel never applies RLIMIT_NPROC to root: run as root, the
  process limit is a ``pids`` cgroup of the command's own (:class:`PidsGroup`, where a writable cgroup
  hierarchy with the pids controller exists; else no process limit, said once in the log);
* a **sandbox** (:class:`View`, Debian's ``bubblewrap``): a read-only view of ``/usr`` (``/bin``, ``/lib``,
  ``/lib64`` link into it; and ``/etc/alternatives``) and of exactly the paths the step needs, writable only where the step writes (the
  runner's output directory, a workspace's build directory), a private ``/tmp`` of bounded size, a fresh
  ``/proc`` and ``/dev``, no other ``/etc``, no ``/root`` and no kit cache beyond those paths; a private network
  namespace (loopback only, down), private IPC and UTS namespaces, every capability dropped; and a PID
  namespace that dies with the step, so nothing a candidate starts outlives it.  The paths keep their names
  inside, so a command's arguments need no rewriting.

``sandbox.mode`` chooses: ``bwrap`` (refuse to run without it), ``none`` (rlimits only: no filesystem,
network or PID isolation; recorded in every record), ``auto`` (bwrap where it works, else none, said once in
the log and in every record).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

log = logging.getLogger("kit")

#: what every sandboxed command sees read-only: /usr, and Debian's alternatives (/usr/bin/c++ and cc are links
#: through /etc/alternatives: without them a tree configured outside the sandbox has no compiler inside)
SYSTEM_RO = ("/usr", "/etc/alternatives")
#: links to /usr as Debian's merged-/usr layout has them
SYSTEM_LINKS = (("usr/lib", "/lib"), ("usr/lib64", "/lib64"), ("usr/bin", "/bin"), ("usr/sbin", "/sbin"))


class SandboxError(Exception):
    """``sandbox.mode = "bwrap"`` but bubblewrap is missing or does not work here, or a sandbox cannot be made
    as asked: a read-only path it must show does not exist, a writable one cannot be created (the message
    says why and names the path and the step)."""


@dataclass(frozen=True)
class Limits:
    """rlimits of a confined command (None: not limited): ``memory_bytes`` (RLIMIT_AS), ``cpu_s`` (RLIMIT_CPU,
    seconds), ``file_bytes`` (RLIMIT_FSIZE: no file may grow larger), ``open_files`` (RLIMIT_NOFILE),
    ``processes`` (how many processes it may add to those the user runs now; RLIMIT_NPROC)."""

    memory_bytes: int | None = None
    cpu_s: int | None = None
    file_bytes: int | None = None
    open_files: int | None = None
    processes: int | None = None

    def prlimit_args(self) -> list[str]:
        """The ``prlimit`` options for these limits (core dumps always off)."""
        out = ["--core=0"]
        if self.memory_bytes is not None:
            out.append(f"--as={self.memory_bytes}")
        if self.cpu_s is not None:
            out.append(f"--cpu={self.cpu_s}:{self.cpu_s + 5}")
        if self.file_bytes is not None:
            out.append(f"--fsize={self.file_bytes}")
        if self.open_files is not None:
            out.append(f"--nofile={self.open_files}")
        if self.processes is not None and os.getuid() != 0:  # root: a pids cgroup instead (RLIMIT_NPROC ignored)
            n = user_processes() + self.processes
            out.append(f"--nproc={n}")
        return out


@dataclass(frozen=True)
class View:
    """What a sandboxed command sees besides :data:`SYSTEM_RO`: ``ro`` paths read-only and ``rw`` paths
    writable, each at its own name, ``bounded`` directories writable up to ``bound_bytes`` each (a tmpfs at
    the directory's name, whose content the kit copies into the directory once the command has ended:
    :mod:`kit.host.proc.bounded`; ``bring_back``: only the entries of those names directly in each, None: all),
    and a private ``/tmp`` of at most ``tmp_bytes``; ``step`` names the command in errors ("build", "runner",
    ...).  Made into a sandbox (:func:`prefix`), every ``ro`` path must exist (outside :data:`SYSTEM_RO`) and a
    missing ``rw`` or ``bounded`` directory is created."""

    ro: tuple[str, ...] = ()
    rw: tuple[str, ...] = ()
    tmp_bytes: int = 256 << 20
    step: str = ""
    bounded: tuple[str, ...] = ()
    bound_bytes: int = 1 << 30
    bring_back: tuple[str, ...] | None = None

    def with_paths(self, ro: Iterable[str | os.PathLike[str]] = (), rw: Iterable[str | os.PathLike[str]] = (),
                   bounded: Iterable[str | os.PathLike[str]] = ()) -> View:
        """This view and more paths (absolute, normalised)."""
        return replace(self, ro=self.ro + tuple(_abs(p) for p in ro), rw=self.rw + tuple(_abs(p) for p in rw),
                       bounded=self.bounded + tuple(_abs(p) for p in bounded))


@dataclass(frozen=True)
class Confinement:
    """How one command is confined: its ``limits`` and, with ``view``, the bubblewrap sandbox (None: no
    sandbox; ``mode`` says why: ``none`` chosen, or ``auto`` without a working bubblewrap)."""

    limits: Limits = field(default_factory=Limits)
    view: View | None = None


@dataclass(frozen=True)
class Policy:
    """How a kind of command is confined, before its paths are known: ``enabled`` (sandbox it with bubblewrap:
    :func:`resolve` of ``sandbox.mode``), its ``limits``, the size of its private ``/tmp`` and of each of its
    bounded directories (``out_bytes``)."""

    enabled: bool = False
    limits: Limits = field(default_factory=Limits)
    tmp_bytes: int = 256 << 20
    out_bytes: int = 1 << 30

    def confine(self, ro: Iterable[str | os.PathLike[str]] = (), rw: Iterable[str | os.PathLike[str]] = (),
                step: str = "", bounded: Iterable[str | os.PathLike[str]] = (),
                bring_back: tuple[str, ...] | None = None) -> Confinement:
        """The :class:`Confinement` of one command (``step`` names it in errors) that must see ``ro`` (each must
        exist when it starts) and write ``rw`` and ``bounded`` (directories, created when it starts if missing;
        sandboxed, a ``bounded`` one holds at most ``out_bytes``, and only its entries named in ``bring_back``
        are brought back, None: all: :class:`View`; not sandboxed, it is as ``rw``, all of it kept)."""
        if not self.enabled:
            return Confinement(self.limits, None)
        view = View(tmp_bytes=self.tmp_bytes, step=step, bound_bytes=self.out_bytes,
                    bring_back=bring_back).with_paths(ro, rw, bounded)
        return Confinement(self.limits, view)


def _abs(p: str | os.PathLike[str]) -> str:
    return os.path.normpath(os.path.abspath(os.fspath(p)))


#: where pids cgroups may be made (cgroup v1's pids hierarchy, or a v2 hierarchy with the pids controller)
PIDS_ROOTS = (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified"))


@functools.cache
def pids_root() -> Path | None:
    """A cgroup directory this process may make a child with a ``pids.max`` in (None: none here)."""
    for root in PIDS_ROOTS:
        probe = root / f"mkb-probe-{os.getpid()}"
        try:
            probe.mkdir()
        except OSError:
            continue
        try:
            if (probe / "pids.max").exists():
                return root
        finally:
            probe.rmdir()
    return None


class PidsGroup:
    """A pids cgroup of one command: at most ``limit`` processes in it and everything it starts (joined by the
    command before it execs, so nothing escapes).  :meth:`release` removes it once they are gone."""

    _serial = 0

    def __init__(self, root: Path, limit: int) -> None:
        if PidsGroup._serial == 0:
            sweep_groups(root)
        PidsGroup._serial += 1
        self.path = root / f"mkb-{os.getpid()}-{PidsGroup._serial}"
        self.path.mkdir()
        (self.path / "pids.max").write_text(str(limit))

    def enter(self) -> list[str]:
        """The command line prefix that joins this group and execs what follows (where the kit's launcher, which
        joins it itself, cannot be compiled)."""
        return ["/bin/sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(self.path)]

    def release(self) -> None:
        """Remove the group (its processes have ended: the command's session was killed); a group that is not
        empty yet is retried for up to 1 s, then left (the kernel keeps an empty group's cost negligible)."""
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)
        log.debug("pids cgroup %s still busy; left", self.path)


def sweep_groups(root: Path) -> int:
    """Remove the empty pids cgroups of kit processes that are gone (a killed worker could not release its
    last ones); returns how many."""
    removed = 0
    for d in root.glob("mkb-*-*"):
        try:
            pid = int(d.name.split("-")[1])
        except (IndexError, ValueError):
            continue
        if pid == os.getpid() or Path(f"/proc/{pid}").exists():
            continue
        try:
            d.rmdir()
            removed += 1
        except OSError:
            pass  # not empty yet: a later sweep
    return removed


def process_group_for(limits: Limits) -> PidsGroup | None:
    """The pids cgroup that enforces ``limits.processes`` for a command run as root (None: not needed, or no
    writable pids hierarchy: then said once in the log)."""
    if limits.processes is None or os.getuid() != 0:
        return None
    root = pids_root()
    if root is None:
        _warn_no_pids()
        return None
    return PidsGroup(root, limits.processes)


@functools.cache
def _warn_no_pids() -> None:
    log.warning("sandbox.processes: running as root, where RLIMIT_NPROC does not apply, and no writable pids "
                "cgroup hierarchy here: the process count of candidate code is not limited")


def user_processes(uid: int | None = None) -> int:
    """How many processes of ``uid`` (default: ours) run now (``/proc``; RLIMIT_NPROC counts those)."""
    uid = os.getuid() if uid is None else uid
    n = 0
    for d in os.scandir("/proc"):
        if d.name.isdigit():
            try:
                if os.stat(d.path).st_uid == uid:
                    n += 1
            except OSError:
                pass
    return n


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def _bwrap_args(view: View) -> list[str]:
    args = [
        "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
        "--die-with-parent", "--cap-drop", "ALL", "--proc", "/proc", "--dev", "/dev",
        "--size", str(view.tmp_bytes), "--tmpfs", "/tmp",
    ]  # fmt: skip
    for ro in SYSTEM_RO:
        args += ["--ro-bind", ro, ro]
    for target, link in SYSTEM_LINKS:
        if os.path.lexists(link):
            args += ["--symlink", target, link]
    for p in dict.fromkeys(view.ro):
        if not _under_system(p):
            args += ["--ro-bind", p, p]
    for p in dict.fromkeys(view.rw):
        args += ["--bind", p, p]
    for p in dict.fromkeys(view.bounded):
        args += ["--size", str(view.bound_bytes), "--tmpfs", p]
    # the sandbox's own root (a tmpfs holding the mount points) read-only: else the directories made for the
    # binds would be writable, unbounded in size, outside the private /tmp
    return args + ["--remount-ro", "/"]


def _under_system(p: str) -> bool:
    return any(p == s or p.startswith(s + "/") for s in SYSTEM_RO)


def prepare(view: View) -> None:
    """Make ``view``'s paths ready to bind: each missing ``rw`` path created as a directory (and its parents,
    owned by this user, mode 0755 less the umask).  Why: bubblewrap cannot bind a path that does not exist,
    and a writable directory left out would leave the step writing to the sandbox's read-only root (ccache's
    ``<cache>/ccache`` on a fresh machine) or, under ``/tmp``, to a throwaway tmpfs.

    Raises:
        SandboxError: an ``ro`` path outside :data:`SYSTEM_RO` does not exist (a path under it may be absent:
            the system bind shows what there is), or an ``rw`` path cannot be created; the message names the
            path, its side and ``view.step``."""
    step = view.step or "a sandboxed command"
    for p in dict.fromkeys(view.rw + view.bounded):
        try:
            os.makedirs(p, mode=0o755, exist_ok=True)
        except OSError as exc:
            raise SandboxError(f"{step}: cannot create its writable path {p}: {exc.strerror}") from exc
    for p in dict.fromkeys(view.ro):
        if not _under_system(p) and not os.path.exists(p):
            raise SandboxError(f"{step}: its read-only path {p} does not exist")


def prefix(view: View, cwd: str | os.PathLike[str] | None = None) -> list[str]:
    """The bubblewrap command line that runs what follows it inside the sandbox ``view``, started in ``cwd``
    when the view shows it (one of its paths or below one), else in its private ``/tmp``.

    Why: a directory the view does not show exists inside only as the mount points of its binds, writable
    when it lies under ``/tmp`` (the private tmpfs) and read-only elsewhere; a kernel writing a large file
    into its working directory was stopped by the file-size limit with the kit's cache under /tmp and wrote
    nothing (its writes failing silently) with the cache under /root.  The private /tmp is the same everywhere.

    Missing writable directories are created first (:func:`prepare`).

    Raises:
        SandboxError: bubblewrap is not installed, a read-only path does not exist, or a writable one cannot
            be created."""
    exe = bwrap_path()
    if exe is None:
        raise SandboxError("bubblewrap (bwrap) is not installed")
    prepare(view)
    chdir = []
    if cwd is not None:
        here = _abs(cwd)
        if not any(here == p or here.startswith(p.rstrip("/") + "/") for p in (*view.ro, *view.rw)):
            chdir = ["--chdir", "/tmp"]
    return [exe, *_bwrap_args(view), *chdir, "--"]


def interpreter_paths() -> list[str]:
    """The paths this Python needs inside a sandbox (a venv and the interpreter it was made from)."""
    paths = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    return sorted(_abs(p) for p in paths)


def lib_dirs(lib_dir: Path | None) -> list[str]:
    """``lib_dir`` and the directories its entries resolve to (a workspace's ``lib/`` holds symlinks into its
    build directory), and ``lib_dir/express`` when present: what a runner loading it must see."""
    if lib_dir is None:
        return []
    out = {_abs(lib_dir)}
    for entry in Path(lib_dir).iterdir():
        target = entry.resolve()
        if target.exists():  # a dangling link (a library its build did not make) needs nothing shown
            out.add(_abs(target.parent))
    return sorted(out)
