"""The kit's launcher (``launch.c`` beside this file): joins a command's pids cgroup, sets its rlimits, its
parent-death signal and its CPU affinity and, for a command whose CPU time is accounted for, is its child
subreaper, in one exec (:func:`prefix`); compiled at first use with the host's C compiler into the kit's cache
(:func:`binary`).

Why: every timing run starts a fresh sandboxed runner, 20 per candidate at 10 rounds.  The chain it replaces
(``/bin/sh`` joining the cgroup, util-linux ``prlimit``, ``setpriv --pdeathsig``, ``taskset``, then the Python
subreaper :mod:`kit.host.proc.subreaper`) cost ~15 ms of a ~86 ms run of the smallest task on the 2-core dev VM
(the subreaper's Python start ~12 ms, the four execs ~3.5 ms); the launcher ~1 ms.  Where no compiler is found or
the compile fails, :mod:`kit.host.proc.spawn` keeps that chain (said once in the log).
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import shutil
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kit.host.sandbox import Limits, PidsGroup

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("launch.c")
#: seconds a compile may take (it takes ~0.2 s; at a load of 4, under 2 s): a compiler that hangs costs every new
#: process this long once, then the chain
COMPILE_TIMEOUT_S = 30.0
#: seconds the launcher's trial may take
TRIAL_TIMEOUT_S = 10.0
#: the compilers tried, first found on PATH wins
COMPILERS = ("cc", "gcc", "clang")

#: the binary per cache folder once looked for in this process (None: not usable; the reason was logged)
_found: dict[Path, str | None] = {}
#: held while this process compiles: a command started meanwhile (the compile's own) takes the chain
_compiling = threading.Lock()


def cache_dir() -> Path:
    """Where the launcher is compiled: ``launch/`` in the kit's default cache (``$MKB_MNN__CACHE_DIR``, else
    ``$XDG_CACHE_HOME/mkb``, else ``~/.cache/mkb``; the environment, since this layer reads no config: the
    launcher is the same whatever cache a run configures)."""
    root = os.environ.get("MKB_MNN__CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "mkb")
    return Path(os.path.abspath(root)) / "launch"


def binary(run: Callable[..., Any]) -> str | None:
    """The launcher's path, compiled into :func:`cache_dir` with ``run`` (:func:`kit.host.proc.run`, passed in:
    it imports this module) where it is not there yet, once per process and folder; None where it cannot be had
    (not Linux, no compiler on PATH, the compile failed, the folder not writable or executable: logged once), or
    while this process compiles it.  Raises nothing."""
    folder = cache_dir()
    found = _found.get(folder, "")
    if found is None or found and os.access(found, os.X_OK):
        return found
    # not looked for yet, or removed since (a cache cleaned while this process lives): looked for (again), not
    # started, since Popen would fail on every command
    if not _compiling.acquire(blocking=False):
        return None  # this thread's compile command, or another thread's command meanwhile: the chain
    try:
        if _found.get(folder, "") == found:  # no other thread did it meanwhile
            path, why = _resolve(folder, run)
            if path is None:
                log.warning("the kit's launcher is not used (%s): host commands start through sh, prlimit, "
                            "setpriv, taskset and a Python subreaper, ~15-35 ms more per timing run", why)
            _found[folder] = path
        return _found[folder]
    finally:
        _compiling.release()


def _resolve(folder: Path, run: Callable[..., Any]) -> tuple[str | None, str]:
    """The launcher in ``folder`` (compiled if missing) or None and why."""
    if not sys.platform.startswith("linux"):
        return None, "not Linux"
    compiler = next((c for c in map(shutil.which, COMPILERS) if c), None)
    if compiler is None:
        return None, f"no C compiler on PATH ({', '.join(COMPILERS)})"
    try:
        source = SOURCE.read_bytes()
        real = os.path.realpath(compiler)
        st = os.stat(real)
    except OSError as e:
        return None, f"{e.filename}: {e.strerror}"
    # the source and the compiler (its file: a new version is a new name) and the machine name the binary
    key = hashlib.sha256(b"\0".join([source, real.encode(), str(st.st_size).encode(), str(st.st_mtime_ns).encode(),
                                     platform.machine().encode()])).hexdigest()[:20]
    path = folder / f"launch-{key}"
    # X_OK also fails on a noexec mount; a file there that fails its trial (cut short, damaged) is compiled again
    if os.access(path, os.X_OK) and _trial(str(path), run) is None:
        return str(path), ""
    return _compile(compiler, folder, path, run)


def _trial(launcher: str, run: Callable[..., Any]) -> str | None:
    """Why ``launcher`` cannot be used (None: it can): it must run a shell command as its subreaper's child and
    give back its output and exit status."""
    try:
        res = run([launcher, "--core=0", "--subreaper", "--", "/bin/sh", "-c", "echo mkb-launch; exit 7"],
                  timeout_s=TRIAL_TIMEOUT_S)
    except OSError as e:
        if os.path.isfile(launcher) and not os.access(launcher, os.X_OK):  # a noexec mount: not "no such file"
            return f"the launcher {launcher} cannot be executed there (a noexec mount, or no execute permission)"
        return f"the launcher {launcher} does not start: {e.strerror}"
    if res.returncode != 7 or res.stdout.strip() != "mkb-launch":
        return f"the launcher {launcher} does not run a command as asked (exit {res.returncode}): {_line(res.output)}"
    return None


def _line(text: str) -> str:
    """A command's output as one short printable line for the log."""
    flat = " ".join(text.split())
    return "".join(c if c.isprintable() else "?" for c in flat)[-200:]


def _compile(compiler: str, folder: Path, path: Path, run: Callable[..., Any]) -> tuple[str | None, str]:
    """Compile :data:`SOURCE` into ``path`` with ``run`` (a temporary file renamed into place: several workers
    may compile at once, each rename is whole) and try it; the path or None and why."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return None, f"{folder}: {e.strerror}"
    tmp = f"{path}.{os.getpid()}-{threading.get_ident()}.tmp"  # this compile's own name
    try:
        res = run([compiler, "-O2", "-std=c11", "-Wall", "-o", tmp, str(SOURCE)], timeout_s=COMPILE_TIMEOUT_S)
        if not res.ok:
            return None, f"{compiler} failed ({res.returncode}{', timed out' if res.timed_out else ''}): {_line(res.output)}"
        why = _trial(tmp, run)
        if why is not None:
            return None, why
        os.replace(tmp, path)
    except OSError as e:
        return None, f"{e.filename or folder}: {e.strerror}"
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return str(path), ""


def prefix(launcher: str, limits: Limits, cpus: Sequence[int], group: PidsGroup | None, subreaper: bool) -> list[str]:
    """The command line prefix (ending with ``--``) that runs what follows in ``group`` (None: none), with
    ``limits`` (core dumps off), SIGKILL when this process dies, on ``cpus`` (empty: not pinned) and, with
    ``subreaper``, as the child of a subreaper that waits for its whole tree (exit status 128 + N for signal N)."""
    out = [launcher]
    if group is not None:
        out.append(f"--cgroup={group.path / 'cgroup.procs'}")
    out += limits.prlimit_args()  # the launcher takes prlimit's syntax for the options it knows
    out.append(f"--parent={os.getpid()}")
    if cpus:
        out.append(f"--cpus={','.join(map(str, cpus))}")
    if subreaper:
        out.append("--subreaper")
    return [*out, "--"]
