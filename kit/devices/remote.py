"""One runner invocation on the device: the prepared call's files pushed, its argv mapped, the run started at
its rendezvous through ``adb shell``, its outputs pulled back into the call's own output folder.

The argv :mod:`kit.mnn.runner` prepared is taken as it is: every argument that names an existing file or folder
of this host is pushed (:class:`Pusher`, content-addressed: a file already there is not pushed again) and
replaced by its device path, and the output folder (``call.out_dir``) by a fresh folder of the run; the
runner's flags pass unchanged, so options the runner gains need nothing here.  The device runs (POSIX sh)::

    mkdir -p RUN/out && chmod 755 RUNNER && cd RUN && ulimit -v KIB; sh -c 'echo mkb_pid:$$ >&2;
        exec taskset MASK RUNNER ARGS --wait-go 1'; echo mkb_exit:$? >&2

so the runner is pinned to the timing cores (``taskset``), its pid is known (to kill it on a timeout) and its
exit status read from the last line whatever adb's version (:mod:`kit.devices.adb`); a status above 128 is the
signal that killed it, as a shell reports it.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Protocol

from kit.devices import adb as kadb
from kit.devices.adb import Adb
from kit.devices.errors import DeviceLost
from kit.host import fstree, proc
from kit.mnn import runner as mrunner

_PID_RE = re.compile(r"^mkb_pid:(\d+)\s*$", re.M)


class Pusher(Protocol):
    """Where a host path is on the device (pushed there first when needed)."""

    def remote(self, local: Path) -> str:
        ...


def core_mask(cores: tuple[int, ...]) -> str:
    """``taskset``'s hexadecimal mask of ``cores`` (``(6, 7)`` → ``c0``)."""
    return format(sum(1 << c for c in cores), "x")


def run_script(argv: list[str], run_dir: str, cores: tuple[int, ...], memory_limit_bytes: int | None) -> str:
    """The device's command line of one run (module docstring): ``argv`` (device paths) pinned to ``cores``,
    in ``run_dir``, under an address-space limit of ``memory_limit_bytes`` (None: none)."""
    inner = f"echo mkb_pid:$$ >&2; exec taskset {core_mask(cores)} {shlex.join(argv)}"
    limit = f"ulimit -v {memory_limit_bytes >> 10} 2>/dev/null; " if memory_limit_bytes else ""
    return (f"mkdir -p {shlex.quote(run_dir)}/out && chmod 755 {shlex.quote(argv[0])} && cd {shlex.quote(run_dir)} "
            f"&& {limit}sh -c {shlex.quote(inner)}; echo {kadb.EXIT_MARK}$? >&2")


def map_argv(call: mrunner.RunnerCall, pusher: Pusher, run_dir: str) -> list[str]:
    """``call.argv`` on the device: the output folder → ``run_dir/out``; every other existing host path pushed
    and replaced by its device path; the rest unchanged."""
    out = []
    for arg in call.argv:
        path = Path(arg)
        if path.is_absolute() and path == call.out_dir.resolve():
            out.append(f"{run_dir}/out")
        elif path.is_absolute() and path.exists():
            out.append(pusher.remote(path))
        else:
            out.append(arg)
    return out


class RemoteWaiting:
    """A runner waiting at its rendezvous on the device (the :class:`kit.host.proc.Waiting` of its ``adb shell``),
    with :meth:`go` and :meth:`cancel` as :class:`kit.host.proc.Waiting` has them; :meth:`go` pulls the run's outputs
    into ``out_dir`` before it returns the run's result."""

    def __init__(self, adb: Adb, waiting: proc.Waiting, run_dir: str, out_dir: Path) -> None:
        self.adb, self.waiting, self.run_dir, self.out_dir = adb, waiting, run_dir, out_dir
        self.pid = waiting.pid

    def go(self, timeout_s: float | None = None) -> proc.ProcResult:
        """As :meth:`kit.host.proc.Waiting.go`, on the device.

        Raises:
            DeviceLost: the run ended without its exit status and the device is not ready any more (or it is,
                but adb lost the run)."""
        return finish(self.adb, self.waiting.go(timeout_s=timeout_s), self.run_dir, self.out_dir)

    def cancel(self) -> None:
        """Kill the local adb (the runner on the device reads end-of-file instead of "go" and exits)."""
        self.waiting.cancel()


def finish(adb: Adb, res: proc.ProcResult, run_dir: str, out_dir: Path) -> proc.ProcResult:
    """The result of a run on the device from its ``adb shell``'s ``res``: the exit status read from the run's
    last line (above 128: the signal), the kit's marks removed; a timed-out run's process killed on the
    device; a successful run's outputs pulled into ``out_dir``.

    Raises:
        DeviceLost: no exit status and no timeout (the device, or adb's connection to it, went away)."""
    status = kadb.status_of(res.stderr)
    if status is None:
        status = kadb.status_of(res.stdout)
    if status is None:
        if res.timed_out:
            _kill(adb, res)
            return res
        err = adb.lost("the runner's adb shell", res)
        raise err if isinstance(err, DeviceLost) else DeviceLost(f"{err} (the run's exit status never came back)")
    signal = status - 128 if 128 < status <= 128 + 64 else None
    if status == 0:
        fstree.remove(out_dir)
        adb.pull(f"{run_dir}/out", out_dir)
    return proc.ProcResult(argv=res.argv, returncode=-signal if signal else status, stdout=kadb.strip_marks(res.stdout),
                           stderr=kadb.strip_marks(res.stderr), wall_s=res.wall_s, timed_out=False, signal=signal,
                           truncated=res.truncated, paused_s=res.paused_s)


def _kill(adb: Adb, res: proc.ProcResult) -> None:
    """Kill the run's process on the device (its pid from ``res``), quietly: the run already failed."""
    found = _PID_RE.findall(res.stderr) or _PID_RE.findall(res.stdout)
    if found:
        try:
            adb.shell(f"kill -9 {int(found[-1])} 2>/dev/null; true", timeout_s=kadb.PROBE_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - best effort on a device that may be gone; the run is recorded anyway
            pass


def start(adb: Adb, call: mrunner.RunnerCall, pusher: Pusher, run_dir: str,
          cores: tuple[int, ...]) -> mrunner.StartedRun | mrunner.RunResult:
    """Start ``call`` on the device in ``run_dir`` pinned to ``cores`` up to its rendezvous (as
    :func:`kit.mnn.runner.start_model`).

    Raises:
        DeviceLost, kit.devices.errors.DeviceError: the device went away, or a push failed."""
    argv = [*map_argv(call, pusher, run_dir), "--wait-go", "1"]
    script = run_script(argv, run_dir, cores, call.settings.memory_limit_bytes)
    timeout_s = call.settings.timeout_s
    started = proc.start(adb.argv("shell", script), ready_line=mrunner.READY_LINE, env=adb.env, timeout_s=timeout_s,
                         log_limit=call.log_limit, **call.keep)  # the stamp stream comes on stderr (kit.mnn.stamps)
    if isinstance(started, proc.ProcResult):
        return call.finish(finish(adb, started, run_dir, call.out_dir))
    return mrunner.StartedRun(call, RemoteWaiting(adb, started, run_dir, call.out_dir), timeout_s)  # type: ignore[arg-type]
