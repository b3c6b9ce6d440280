"""The kit's adb client: one device (``-s SERIAL``), every command through :func:`kit.host.proc.run` with a timeout.

adb's command-line contract, as used here: ``adb devices``, ``adb -s S get-state`` (prints ``device``; exit 1
and ``error: device unauthorized.`` / ``error: device offline`` / ``error: device 'S' not found`` otherwise),
``adb -s S push LOCAL REMOTE`` and ``pull REMOTE LOCAL`` (a folder onto a path that does not exist yet is copied
to that path; missing parents of REMOTE are made), ``adb -s S shell SCRIPT`` (SCRIPT runs in the device's
``sh``; stdin, stdout and stderr pass through).  Modern adb (shell protocol v2) returns the remote exit status
and keeps stderr apart; older adb returns 0 and merges them, so every script here ends by printing its status
on stderr as ``mkb_exit:N`` (:data:`EXIT_MARK`) and the status is read from that line, the last one that has
it, on either stream.  A command that ends without the line lost its device (or adb's server), unless it timed
out.

Errors: :class:`~kit.devices.errors.AdbMissing` (no adb program), :class:`~kit.devices.errors.DeviceLost` (the
device is not listed, offline, unauthorized, or adb did not answer within its timeout; the message names the
state and what to do), :class:`~kit.devices.errors.DeviceError` (a push or pull failed on a device that is
still there).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from kit.devices.errors import AdbMissing, DeviceError, DeviceLost
from kit.host import proc

#: the line every script prints last on stderr: its exit status
EXIT_MARK = "mkb_exit:"
_EXIT_RE = re.compile(r"^mkb_exit:(\d+)\s*$", re.M)
#: environment variables adb reads besides the kit's base ones (its keys under HOME, the server's address)
_ADB_ENV_PREFIXES = ("ANDROID_", "ADB_")
#: seconds for ``get-state`` when probing a device after a failed command
PROBE_TIMEOUT_S = 15.0
#: what to do about each state a device can be in besides ``device``
_ADVICE = {
    "unauthorized": "accept the 'Allow USB debugging' prompt on the device (or `adb kill-server` and reconnect)",
    "offline": "reconnect the device (USB cable, or `adb connect` for a network device)",
    "missing": "attach the device or fix device.serial",
    "unresponsive": "adb did not answer: check the cable and `adb devices`",
}


def status_of(text: str) -> int | None:
    """The exit status a script printed (the last :data:`EXIT_MARK` line of ``text``), or None."""
    found = _EXIT_RE.findall(text)
    return int(found[-1]) if found else None


def strip_marks(text: str) -> str:
    """``text`` without the lines the kit's scripts print for themselves (exit status, pid)."""
    return re.sub(r"^mkb_(exit|pid):\d+\s*\n?", "", text, flags=re.M)


def wrap(script: str) -> str:
    """``script`` run in a subshell, then its exit status printed (:data:`EXIT_MARK`, on stderr)."""
    return f"( {script} ); echo {EXIT_MARK}$? >&2"


@dataclass(frozen=True)
class Shell:
    """A finished ``adb shell``: the script's ``status`` and its ``stdout``/``stderr`` (marks removed)."""

    status: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class Adb:
    """adb for the device ``serial`` (``program``: the adb executable); ``timeout_s`` for every command."""

    program: Path
    serial: str
    timeout_s: float = 120.0

    @classmethod
    def find(cls, program: str, serial: str, timeout_s: float = 120.0) -> Adb:
        """The client of ``program`` (a name on PATH or a path).

        Raises:
            AdbMissing: no such program (the message names ``device.adb``)."""
        found = proc.which(program) if "/" not in program else (Path(program) if os.access(program, os.X_OK) else None)
        if found is None:
            raise AdbMissing(f"device.adb = {program!r}: no such program (install Android's platform tools, "
                             "e.g. `apt-get install adb`, or give its path)")
        return cls(found, serial, timeout_s)

    @property
    def env(self) -> dict[str, str]:
        """adb's environment: the kit's base one plus ``ANDROID_*`` and ``ADB_*`` (server address, keys)."""
        extra = {k: v for k, v in os.environ.items() if k.startswith(_ADB_ENV_PREFIXES)}
        return proc.base_env(extra)

    def argv(self, *args: str) -> list[str]:
        """The command line of ``adb -s SERIAL ARGS``."""
        return [str(self.program), "-s", self.serial, *args]

    def _run(self, args: list[str], timeout_s: float | None = None, serial: bool = True) -> proc.ProcResult:
        argv = self.argv(*args) if serial else [str(self.program), *args]
        return proc.run(argv, env=self.env, timeout_s=timeout_s or self.timeout_s, stdin_bytes=b"")

    def devices(self) -> dict[str, str]:
        """Serial → state of every device adb lists (``device``, ``unauthorized``, ``offline``, ...).

        Raises:
            DeviceLost: adb itself failed or did not answer."""
        res = self._run(["devices"], PROBE_TIMEOUT_S, serial=False)
        if not res.ok:
            raise DeviceLost(f"`adb devices` failed ({_why(res)})")
        rows = [line.split() for line in res.stdout.splitlines()[1:] if line.strip() and not line.startswith("*")]
        return {r[0]: r[1] for r in rows if len(r) >= 2}

    def state(self) -> str:
        """``device``, ``unauthorized``, ``offline``, ``missing`` (not listed) or ``unresponsive`` (no answer
        within :data:`PROBE_TIMEOUT_S`)."""
        res = self._run(["get-state"], PROBE_TIMEOUT_S)
        if res.timed_out:
            return "unresponsive"
        if res.ok and res.stdout.strip():
            return res.stdout.strip().split()[-1]
        text = res.output.lower()
        for state in ("unauthorized", "offline"):
            if state in text:
                return state
        return "missing"

    def check(self) -> None:
        """Refuse a device that is not ready.

        Raises:
            DeviceLost: names the state, what to do, and the devices adb lists."""
        state = self.state()
        if state == "device":
            return
        try:
            listed = ", ".join(f"{s} ({st})" for s, st in sorted(self.devices().items())) or "none"
        except DeviceLost:
            listed = "unknown (`adb devices` failed)"
        raise DeviceLost(f"adb device {self.serial!r} is {state}: {_ADVICE.get(state, 'check `adb devices`')}; "
                         f"adb lists: {listed}")

    def lost(self, what: str, res: proc.ProcResult) -> DeviceError:
        """The error for a command ``what`` that failed with ``res``: :class:`DeviceLost` when the device is not
        ready any more (probed), else a :class:`DeviceError` with adb's message."""
        try:
            self.check()
        except DeviceLost as exc:
            return DeviceLost(f"{what}: {exc}")
        return DeviceError(f"{what} failed on device {self.serial!r} ({_why(res)})")

    def push(self, local: Path, remote: str) -> None:
        """Copy the file or folder ``local`` to ``remote`` (a folder: onto ``remote`` itself, which must not
        exist yet).

        Raises:
            DeviceLost, DeviceError: as :meth:`lost`."""
        res = self._run(["push", str(local), remote])
        if not res.ok:
            raise self.lost(f"adb push {local} {remote}", res)

    def pull(self, remote: str, local: Path) -> None:
        """Copy the device's file or folder ``remote`` to ``local`` (which must not exist yet).

        Raises:
            DeviceLost, DeviceError: as :meth:`lost`."""
        res = self._run(["pull", remote, str(local)])
        if not res.ok:
            raise self.lost(f"adb pull {remote} {local}", res)

    def shell(self, script: str, timeout_s: float | None = None) -> Shell:
        """Run ``script`` in the device's shell and wait for it (``timeout_s``, default the client's).

        Raises:
            DeviceLost: the script ended without its status (the device went away) or timed out.
            DeviceError: adb failed on a device that is still there."""
        res = self._run(["shell", wrap(script)], timeout_s)
        status = status_of(res.stderr) if status_of(res.stderr) is not None else status_of(res.stdout)
        if status is None:
            if res.timed_out:
                raise DeviceLost(f"adb shell on {self.serial!r} did not finish within "
                                 f"{timeout_s or self.timeout_s:g} s ({script[:80]!r})")
            raise self.lost("adb shell", res)
        return Shell(status, strip_marks(res.stdout), strip_marks(res.stderr))


def _why(res: proc.ProcResult) -> str:
    """What a failed adb command said, short."""
    if res.timed_out:
        return f"no answer within {res.wall_s:.0f} s"
    said = " ".join(res.output.split())[-300:]
    return f"exit {res.returncode}: {said}" if said else f"exit {res.returncode}"
