"""How a command runs: :class:`RunSpec`, the options :func:`kit.host.proc.run` and :func:`kit.host.proc.start`
share (working directory, environment, limits, CPU cores, confinement, log size)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kit.host.proc.capture import Capture
from kit.host.sandbox import Confinement, Limits


@dataclass(frozen=True)
class RunSpec:
    """How one command runs.

    ``cwd``: working directory (a scratch dir for untrusted programs); ``env``: the complete environment (default
    :func:`kit.host.proc.base_env`; the program is looked up on its ``PATH``); ``timeout_s``: wall-clock limit in
    seconds, on expiry the process group gets SIGTERM, then SIGKILL after ``grace_s`` seconds; ``log_limit``:
    bytes kept of each of stdout and stderr; ``memory_limit_bytes`` / ``cpu_limit_s``: RLIMIT_AS / RLIMIT_CPU of
    the child (they win over ``confine``'s limits); ``cpus``: the CPU cores the child (and what it starts) may
    run on, empty: no pinning; ``confine``: further rlimits and a sandbox (:class:`kit.host.sandbox.Confinement`);
    ``keep_lines``: every line of stdout or stderr holding this text is kept whole, up to ``keep_bytes`` bytes of
    such lines per stream, besides the ``log_limit`` bytes of the rest (a timing run's clock stamps,
    :mod:`kit.mnn.stamps`; empty: none).
    ``cpu_account``: the result's ``cpu_s`` holds the CPU time of the command and everything it started
    (a subreaper runs in front of it: the launcher, :mod:`kit.host.proc.launch`, or
    :mod:`kit.host.proc.subreaper`; not behind a container bridge).
    """

    cwd: str | os.PathLike[str] | None = None
    env: Mapping[str, str] | None = None
    timeout_s: float | None = None
    log_limit: int = 256 * 1024
    memory_limit_bytes: int | None = None
    cpu_limit_s: int | None = None
    cpus: Sequence[int] = ()
    confine: Confinement | None = None
    grace_s: float = 3.0
    keep_lines: str = ""
    keep_bytes: int = 0
    cpu_account: bool = False

    def captures(self) -> tuple[Capture, Capture]:
        """Fresh bounded buffers for a command's stdout and stderr (:class:`kit.host.proc.capture.Capture`)."""
        marker = self.keep_lines.encode()
        return Capture(self.log_limit, marker, self.keep_bytes), Capture(self.log_limit, marker, self.keep_bytes)

    def confinement(self) -> Confinement:
        """:attr:`confine` with the single limits folded in (they win over its own)."""
        c = self.confine or Confinement()
        if self.memory_limit_bytes is None and self.cpu_limit_s is None:
            return c
        lim = c.limits
        return Confinement(Limits(self.memory_limit_bytes if self.memory_limit_bytes is not None else lim.memory_bytes,
                                  self.cpu_limit_s if self.cpu_limit_s is not None else lim.cpu_s, lim.file_bytes,
                                  lim.open_files, lim.processes), c.view)
