"""What a command leaves: :class:`ProcResult`, its output decoded and truncated; :class:`FromProcess` for the
results built on one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProcResult:
    """Result of one command.

    ``returncode`` is the exit status, or ``-N`` when killed by signal N (then ``signal == N``).
    ``stdout``/``stderr`` are decoded (UTF-8, replacement) and truncated to ``log_limit`` bytes each,
    keeping the head and the tail.  ``wall_s`` is wall-clock seconds the command ran, not counting
    ``paused_s``, the seconds it was stopped while a timing phase had the node (see :func:`pausable`).
    ``stopped``: killed because the caller's ``stop_when`` said so (:func:`kit.host.proc.run`), not by the timeout.
    ``full``: the command's bounded directories (:attr:`kit.host.sandbox.View.bounded`) that it filled up to their
    bound: their content was dropped, and the command did not succeed.
    ``cpu_s``: with :attr:`RunSpec.cpu_account`, the CPU seconds (user + system) of the command and of every process
    it started, from the kernel's accounting (``wait4``'s rusage); None without it, or where it cannot be read (a
    container bridge, a command killed at its timeout).
    """

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    timed_out: bool = False
    signal: int | None = None
    truncated: bool = False
    paused_s: float = 0.0
    stopped: bool = False
    full: tuple[str, ...] = ()
    cpu_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.stopped and not self.full

    @property
    def output(self) -> str:
        return self.stdout + ("\n" if self.stdout and self.stderr else "") + self.stderr


class FromProcess:
    """For results that carry the :class:`ProcResult` of the process they come from as ``proc`` (a converter's,
    a runner's): whether it timed out, and the signal that killed it."""

    proc: ProcResult

    @property
    def timed_out(self) -> bool:
        return self.proc.timed_out

    @property
    def signal(self) -> int | None:
        return self.proc.signal

