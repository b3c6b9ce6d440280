"""Starting a command: its environment, the launcher or wrapper that sets its rlimits and parent-death signal, a session
of its own, and the record of that session under :func:`track_children`'s directory (see :mod:`kit.host.proc`)."""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from kit.host.proc import containermode as container
from kit.host.proc import launch
from kit.host.proc.bounded import Held
from kit.host.proc.capture import Capture
from kit.host.proc.reaper import MARK_VAR
from kit.host.proc.result import ProcResult
from kit.host.proc.sessions import kill_session
from kit.host.proc.spec import RunSpec
from kit.host.sandbox import Limits, PidsGroup, prefix, process_group_for

#: environment variables passed through by default (everything else must be given explicitly)
BASE_ENV_KEYS = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "CCACHE_DIR", "CCACHE_BASEDIR", "CCACHE_NOHASHDIR")


def base_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A minimal environment: :data:`BASE_ENV_KEYS` from ours, then ``extra`` on top."""
    env = {k: os.environ[k] for k in BASE_ENV_KEYS if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.setdefault("LANG", "C.UTF-8")
    if extra:
        env.update(extra)
    return env


def which(program: str, env: Mapping[str, str] | None = None) -> Path | None:
    """Locate ``program`` on ``env['PATH']`` (or ours)."""
    path = (env or os.environ).get("PATH")
    found = shutil.which(program, path=path)
    return Path(found) if found else None


#: where :func:`run` records the process group of each running child (None: not recorded)
_track_dir: Path | None = None


def track_children(directory: Path) -> list[int]:
    """Record the process group of each child :func:`run` starts from now on in ``directory`` (a file named by
    the group id holding :func:`_identity`, removed when the group is reaped), after SIGKILLing the groups
    recorded there by a previous owner that died without reaping them.  Returns the group ids it killed.

    A recorded group is killed only while its leader is the very process recorded: same boot, same start time,
    recorded in this same directory.  Why: a number alone named another process after a reboot or pid reuse, and
    a copy of a cache taken while a run was going (its workspace lock not held in the copy) named the live
    compilers of that run, which the copy's first worker then killed.

    Call once per worker process, right after taking the lock that makes ``directory`` its own (e.g. a
    workspace lock), so that no live process still owns those groups.
    """
    global _track_dir
    directory.mkdir(parents=True, exist_ok=True)
    killed = []
    for f in directory.iterdir():
        if f.name.isdigit():
            try:
                recorded = f.read_text()
            except OSError:
                recorded = ""
            if recorded and recorded == _identity(int(f.name), directory) and kill_session(int(f.name)):
                killed.append(int(f.name))
            f.unlink(missing_ok=True)
    _track_dir = directory
    return killed


def _identity(pid: int, directory: Path) -> str:
    """What names process ``pid`` as the leader a tracking file in ``directory`` recorded: the boot id, the
    process's start time (clock ticks since boot, ``/proc/<pid>/stat`` field 22) and the directory's real path;
    "" when the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""
    start = stat.rsplit(")", 1)[-1].split()[19]  # the fields after the command name start at field 3
    return f"{boot} {start} {os.path.realpath(directory)}\n"


_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> None:
    """In the child before exec: SIGKILL me when the thread that forked me dies (Linux only)."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(137)


_PRLIMIT, _SETPRIV, _TASKSET = shutil.which("prlimit"), shutil.which("setpriv"), shutil.which("taskset")


def _wrapper(limits: Limits, cpus: Sequence[int] = (), parent_death: bool = True) -> list[str] | None:
    """``prlimit`` (core dumps off and :class:`kit.host.sandbox.Limits`), ``setpriv --pdeathsig KILL`` and, with
    ``cpus``, ``taskset --cpu-list`` (util-linux), each exec'ing the next, so the command runs as the same
    direct child with the same limits, parent-death signal and CPU affinity a preexec_fn would set; None where
    they are missing (then :func:`run` uses a preexec_fn).  On the host, used where the kit's launcher
    (:mod:`kit.host.proc.launch`, the same in one exec) cannot be compiled; in a container, always."""
    if not sys.platform.startswith("linux") or _PRLIMIT is None or _SETPRIV is None:
        return None
    if cpus and _TASKSET is None:
        return None
    pin = [_TASKSET, "--cpu-list", ",".join(map(str, cpus))] if cpus else []
    death = [_SETPRIV, "--pdeathsig", "KILL", "--"] if parent_death else []
    return [_PRLIMIT, *limits.prlimit_args(), "--", *death, *pin]


def _set_limits(limits: Limits) -> None:
    """In the child before exec (the fallback without util-linux): :class:`kit.host.sandbox.Limits` as rlimits."""
    pairs = [(resource.RLIMIT_CORE, 0), (resource.RLIMIT_AS, limits.memory_bytes),
             (resource.RLIMIT_FSIZE, limits.file_bytes), (resource.RLIMIT_NOFILE, limits.open_files)]
    for which, value in pairs:
        if value is not None:
            resource.setrlimit(which, (value, value))
    if limits.cpu_s is not None:
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 5))


def _check_program(program: str, env: Mapping[str, str], cwd: str | os.PathLike[str] | None) -> None:
    """Raise FileNotFoundError as Popen would when ``program`` cannot be executed (the wrapper would only
    exit 127)."""
    if os.sep in program:
        path = program if os.path.isabs(program) or cwd is None else os.path.join(os.fspath(cwd), program)
        found = os.path.isfile(path) and os.access(path, os.X_OK)
    else:
        found = shutil.which(program, path=env.get("PATH", os.defpath)) is not None
    if not found:
        raise FileNotFoundError(errno.ENOENT, f"No such file or directory: {program!r}", program)


@dataclass
class Spawned:
    """A started command: its argv, the Popen, the record of its session under :func:`track_children`'s
    directory (None when not tracking), whether it runs in the sandbox (then exit status 128 + N means killed by
    signal N), its pids cgroup (None: none) and its bounded directories (None: none; :mod:`kit.host.proc.bounded`),
    and once released those that were full (:attr:`ProcResult.full`)."""

    args: list[str]
    proc: subprocess.Popen[bytes]
    marker: Path | None
    sandboxed: bool
    group: PidsGroup | None
    held: Held | None = None
    full: tuple[str, ...] = ()

    def release(self) -> None:
        """What the ended command held: the container bridge's link, the session record, the pids cgroup, its
        bounded directories (brought back).

        Raises:
            OSError: a bounded directory could not be brought back (the rest is released)."""
        container.unlink(self.proc.pid)
        if self.marker is not None:
            self.marker.unlink(missing_ok=True)
        if self.group is not None:
            self.group.release()
        if self.held is not None:
            held, self.held = self.held, None
            self.full = held.bring_back()

    def result(self, out: Capture, err: Capture, elapsed_s: float, timed_out: bool, paused_s: float) -> ProcResult:
        """The :class:`ProcResult` of the ended command: its output as kept (bounded: :class:`Capture`),
        ``wall_s`` the ``elapsed_s`` less ``paused_s``."""
        rc = self.proc.returncode
        if self.sandboxed and rc is not None and 128 < rc <= 128 + 64:
            # bubblewrap reaps the command and exits with 128 + the signal that killed it, as a shell does
            rc = -(rc - 128)
        so, t1 = out.text()
        se, t2 = err.text()
        return ProcResult(argv=tuple(self.args), returncode=rc if rc is not None else -9, stdout=so, stderr=se,
                          wall_s=elapsed_s - paused_s, timed_out=timed_out,
                          signal=-rc if rc is not None and rc < 0 else None, truncated=t1 or t2, paused_s=paused_s,
                          full=self.full)


def _spawn(args: list[str], spec: RunSpec, stdin_pipe: bool, launcher: str | None) -> Spawned:
    """Start ``args`` as ``spec`` says, in a session of its own with the limits, the parent-death signal, the CPU
    affinity and, with a confinement's view, inside the sandbox (see :func:`kit.host.proc.run`), stdout/stderr
    piped, stdin piped or /dev/null; record its session under :func:`track_children`'s directory.  ``launcher``:
    the path of :mod:`kit.host.proc.launch`'s program (None: the chain of util-linux helpers, or a preexec_fn)."""
    line = _command_line(args, spec, launcher)
    proc = _start(line, stdin_pipe)
    if line.pidfile is not None:
        container.link(proc.pid, line.pidfile)
    return Spawned(args, proc, _track(proc.pid), line.boxed, line.group, line.held)


@dataclass
class _Line:
    """A command ready to start: its argv, working directory, environment and :class:`subprocess.Popen`'s other
    arguments; its pids cgroup and held folders (released where it does not start); the bridge's pidfile behind
    a container (linked once it has); whether it runs boxed (in the sandbox, or reaped)."""

    command: list[str]
    cwd: str | os.PathLike[str] | None
    env: dict[str, str]
    popen_args: dict
    group: PidsGroup | None
    held: Held | None
    pidfile: Path | None
    boxed: bool


def _environment(env: Mapping[str, str] | None) -> dict[str, str]:
    environment = dict(env) if env is not None else base_env()
    if (mark := os.environ.get(MARK_VAR)) is not None:
        # every command carries the driver session's mark, whatever environment its caller gave: a command whose
        # worker died before the parent-death signal took effect (a SIGKILL in the few ms between fork and
        # prctl) lives on, orphaned, and the reaper finds it only by this mark when the run ends
        environment[MARK_VAR] = mark
    return environment


def _command_line(args: list[str], spec: RunSpec, launcher: str | None) -> _Line:
    """The command line of :func:`_spawn`: the sandbox's prefix, then the container's bridge, the launcher, the
    util-linux helpers or a preexec_fn (the first that applies) for the limits, parent-death signal and cores."""
    cwd, cpus, confine = spec.cwd, spec.cpus, spec.confinement()
    environment = _environment(spec.env)
    popen_args: dict = {}
    limits, view = confine.limits, confine.view
    target = container.current()
    if view is not None and view.bounded and target is not None:
        # bounded directories need the sandbox's namespace reachable through /proc: behind a container's bridge
        # they are plain writable ones (the container's limits hold)
        view = replace(view, rw=view.rw + view.bounded, bounded=())
    box = prefix(view, cwd) if view is not None else []
    # in a container its pids cgroup bounds the processes (a cgroup of ours would be a host path)
    group = process_group_for(limits) if target is None else None
    enter = group.enter() if group is not None else []
    # no parent-death signal inside a container: a command `docker exec` starts is a child of `runc init`,
    # which exits right after starting it, so the signal fires at random (measured: setpriv --pdeathsig KILL
    # under docker exec, 2 of 6 `sleep 0.3` commands died of SIGKILL, 0 of 3 without it).  The bridge's
    # session link and the container's reaper end what a dead worker leaves instead.
    wrapper = _wrapper(limits, cpus, parent_death=target is None)
    # on the host the launcher does in one exec what the cgroup's sh, the util-linux helpers and the Python
    # subreaper do (kit.host.proc.launch); behind a container's bridge the chain, which the container has (the
    # launcher is compiled for the host)
    launcher = launcher if target is None else None
    reaped = spec.cpu_account and target is None  # exit status 128 + N for signal N, as bubblewrap's
    if reaped and launcher is None:
        box = [sys.executable, "-I", "-S", str(Path(__file__).with_name("subreaper.py")), *box]
    pidfile = None
    if target is not None:
        # the same command line, run inside the container by the bridge (kit.host.proc.containermode)
        _check_program(args[0], environment, cwd)
        command, pidfile = container.bridge_argv(target, (wrapper or []) + box + args, cwd)
        if cpus and _TASKSET is not None:
            # the bridge on the command's cores too: the timing stage reads a run's affinity from its pid
            command = [_TASKSET, "--cpu-list", ",".join(map(str, cpus)), *command]
        cwd = None  # the bridge's own; the command's is the exec's working directory
    elif launcher is not None:
        _check_program(args[0], environment, cwd)
        command = launch.prefix(launcher, limits, cpus, group, reaped) + box + args
    elif wrapper is not None:
        # limits and the parent-death signal set by exec'd helpers: without a preexec_fn, Popen can vfork
        # (measured: ~1-3 ms per command instead of ~17 ms for a fork of a worker process with ray, polars
        # and onnxruntime loaded)
        _check_program(args[0], environment, cwd)
        command = enter + wrapper + box + args
    else:
        if box or enter:
            _check_program(args[0], environment, cwd)
        command = enter + box + args
        popen_args["preexec_fn"] = _preexec(os.getpid(), limits, cpus)
    held = Held(view) if view is not None and view.bounded else None
    if held is not None:
        cut = len(command) - len(args) - 1  # the "--" that ends bubblewrap's options
        command = command[:cut] + held.args() + command[cut:]
        popen_args["pass_fds"] = held.pass_fds
    return _Line(command, cwd, environment, popen_args, group, held, pidfile, bool(box) or reaped)


def _preexec(parent_pid: int, limits: Limits, cpus: Sequence[int]):
    """The preexec_fn where neither the launcher nor the helpers are at hand: the parent-death signal (against
    ``parent_pid``), the limits, the cores."""

    def run() -> None:
        _die_with_parent(parent_pid)
        _set_limits(limits)
        if cpus:
            os.sched_setaffinity(0, cpus)

    return run


def _start(line: _Line, stdin_pipe: bool) -> subprocess.Popen:
    """Popen of ``line`` in a session of its own, its held folders attached; its pids cgroup released (and its
    held folders discarded) where it does not start."""
    try:
        proc = subprocess.Popen(
            line.command,
            cwd=os.fspath(line.cwd) if line.cwd is not None else None,
            env=line.env,
            stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            **line.popen_args,
        )
    except BaseException:
        if line.group is not None:
            line.group.release()
        if line.held is not None:
            line.held.discard()
        raise
    if line.held is not None:
        try:
            line.held.attach(proc)
        except BaseException:
            if line.group is not None:
                line.group.release()
            raise
    return proc


def _track(pid: int) -> Path | None:
    """The record of ``pid``'s session under :func:`track_children`'s directory (None: none kept)."""
    marker = _track_dir / str(pid) if _track_dir is not None else None
    if marker is not None:
        try:
            marker.write_text(_identity(pid, _track_dir))
        except FileNotFoundError:
            # the directory's owner is gone with it (a temporary cache removed while this process lives on): the
            # command still runs and must be waited for, so no record rather than an error
            marker = None
    return marker
