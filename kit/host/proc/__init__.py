"""The kit's only subprocess runner.

Every external command (cmake, ninja, g++, MNNConvert, the runner, register.py) goes through :func:`run`:
an argv list (never a shell string), an explicit environment, a new process group, a timeout that sends
SIGTERM then SIGKILL to the whole group, optional rlimits, and captured, truncated logs.  :func:`start` is the
same in two halves, for a command with a rendezvous (the timing runner: start-up first, the measured runs on
:meth:`Waiting.go`).

Every child starts a new *session*; killing a command means killing every process of that session (its
process group and any group inside it: ninja puts each compiler in a group of its own).  A command's pipes
are pumped by one selector in the calling thread (:class:`_Pipes`, no reader threads); once the leader has
exited they get :data:`PIPE_GRACE_S` seconds to reach EOF, then the kit stops reading them and kills what
holds their other ends (a grandchild that called ``setsid``; :func:`kill_pipe_holders`), so no command
holds the kit longer than its leader lives plus that grace.

A worker process that dies (a Ray actor killed, the driver SIGKILLed) cannot enforce its children's
timeouts any more.  Two safeguards: the direct child gets SIGKILL when the thread that started it dies
(Linux ``PR_SET_PDEATHSIG``: the runner and MNNConvert are direct children), and, once a worker has called
:func:`track_children`, every running child's session is recorded as a file in the worker's directory, so
the next owner of that directory (the worker that takes the same workspace) kills the sessions left behind
(ninja's compiler processes) before it builds there.

The pids cgroup, the rlimits, the parent-death signal, the CPU affinity and, for a command whose CPU time is
accounted for, a child subreaper are set by the kit's launcher exec'ing the command (:mod:`kit.host.proc.launch`,
a small C program compiled at first use into the kit's cache; same pid, same session), so Popen needs no
preexec_fn and can vfork: ~3 ms per command instead of ~17 ms to fork a worker process that has Ray, Polars and
ONNX Runtime loaded (measured on 2 cores).  Where it cannot be compiled, a chain of programs does the same
(``/bin/sh`` joining the cgroup, util-linux ``prlimit``, ``setpriv --pdeathsig`` and ``taskset``, then
:mod:`kit.host.proc.subreaper`), ~15-35 ms more per sandboxed timing run; where util-linux is missing too, a
preexec_fn.
"""

from __future__ import annotations

# The modules, lowest first: result, capture, container, reaper and pause import nothing of the kit; sessions
# imports container; bounded imports kit.host.fstree and kit.host.sandbox; spec imports capture; launch imports kit.host.sandbox (and command, when it compiles); spawn imports
# sessions, container, reaper, bounded and launch; pipes imports sessions, pause and capture; command imports all of them.  What is re-exported here is bound once:
# to change a constant or a module's state (a test's monkeypatch), set it on the module that defines it
# (e.g. kit.host.proc.pipes.PIPE_GRACE_S, kit.host.proc.spawn._track_dir), not here.
from kit.host.proc.command import Waiting, detach, run, start
from kit.host.proc.containermode import ContainerTarget, command_pid
from kit.host.proc.containermode import current as current_container
from kit.host.proc.containermode import use as use_container
from kit.host.proc.pause import PAUSE_POLL_S, Pausable, pausable, pauses_reported
from kit.host.proc.pipes import (
    PIPE_GRACE_S,
)
from kit.host.proc.pipes import (
    _wait_exit as _wait_exit,  # not public: the tests reach it to try both of its ways
)
from kit.host.proc.result import FromProcess, ProcResult
from kit.host.proc.sessions import (
    kill_pipe_holders,
    kill_session,
    process_start,
    session_cpu_s,
    session_members,
    signal_session,
)
from kit.host.proc.spawn import BASE_ENV_KEYS, base_env, track_children, which
from kit.host.proc.spec import RunSpec

__all__ = [
    "command_pid",
    "BASE_ENV_KEYS",
    "ContainerTarget",
    "PAUSE_POLL_S",
    "PIPE_GRACE_S",
    "Pausable",
    "FromProcess",
    "ProcResult",
    "RunSpec",
    "Waiting",
    "base_env",
    "detach",
    "pauses_reported",
    "current_container",
    "kill_pipe_holders",
    "kill_session",
    "pausable",
    "process_start",
    "run",
    "session_cpu_s",
    "session_members",
    "signal_session",
    "start",
    "track_children",
    "use_container",
    "which",
]
