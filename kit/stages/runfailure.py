"""What a finished runner process stands for: one mapping from its exit, signal and limits to a stage's status.

:func:`process_failure` maps a runner's (or the converter's) exit status, signal, output and limits to a status and
error kind; :func:`protocol_failure` maps a runner that broke its protocol (:class:`kit.mnn.runner.RunnerProtocolError`)
to the candidate's failure.  Verification and timing runs alike (:mod:`kit.stages.verify`,
:mod:`kit.stages.timingrun`, :mod:`kit.stages.timedcheck`).
"""

from __future__ import annotations

import re
import signal

from kit.host import proc
from kit.mnn import runner as mrunner
from kit.results.outcomes import StageFailure
from kit.results.records import ErrorKind, Status

#: signals the kernel sends for a resource limit, and the limit's setting
_LIMIT_SIGNALS = {signal.SIGXFSZ: "the file-size limit (sandbox.file_mb)", signal.SIGXCPU: "the CPU-time limit (sandbox.run_cpu_s)"}
#: what a process prints when an allocation or a fork failed at a limit
_LIMIT_TEXTS = (("std::bad_alloc", "the memory limit (verify.memory_limit_mb)"),
                ("cannot allocate memory", "the memory limit (verify.memory_limit_mb)"),
                ("resource temporarily unavailable", "the process limit (sandbox.processes)"))


#: exit statuses of the runner's checks around a forward, and what they stand for
_RUNNER_VERDICTS = {
    mrunner.EXIT_INPUT_MODIFIED: (Status.VERIFY_MISMATCH, ErrorKind.INPUT_MODIFIED),
    mrunner.EXIT_THREADS_LEFT: (Status.RUNTIME_CRASH, ErrorKind.THREADS_LEFT),
    mrunner.EXIT_TIMED_OUTPUT_CHANGED: (Status.VERIFY_MISMATCH, ErrorKind.TIMED_OUTPUT_MISMATCH),
    mrunner.EXIT_PROCESS_LEFT: (Status.RUNTIME_CRASH, ErrorKind.PROCESSES_LEFT),
    # a stamp not written whole, or stderr replaced: the candidate closed fd 2 or put a pipe of its own there
    mrunner.EXIT_STAMP_LOST: (Status.RUNTIME_CRASH, ErrorKind.FORBIDDEN),
    # a system call the runner's seccomp filter refuses (its line on stderr names the call)
    mrunner.EXIT_FORBIDDEN_CALL: (Status.RUNTIME_CRASH, ErrorKind.FORBIDDEN),
}
#: the runner's line for an allocation beyond the memory limit (kit/mnn/runner/mkb_lockdown.hpp)
_MEMORY_LIMIT_LINE = re.compile(r"memory limit of (\d+) MiB")


def _memory_limit_failure(res: proc.ProcResult, what: str, tail: str) -> StageFailure:
    """Runner exit :data:`kit.mnn.runner.EXIT_MEMORY_LIMIT`: RUNTIME_CRASH, ``limit``, naming
    ``verify.memory_limit_mb`` and its value (the runner's RLIMIT_AS in MiB, from its line on stderr)."""
    found = _MEMORY_LIMIT_LINE.search(res.stderr)
    value = f" = {found.group(1)}" if found else ""
    return StageFailure(Status.RUNTIME_CRASH, ErrorKind.LIMIT, f"{what} stopped by the memory limit "
                        f"(verify.memory_limit_mb{value}) (exit {res.returncode}): {tail}")


def limit_cause(res: proc.ProcResult) -> str | None:
    """The resource limit that stopped a failed process, in words naming its setting, or None."""
    if res.full:
        return "the size limit of its output directory (sandbox.out_mb)"
    if res.signal is not None and res.signal in _LIMIT_SIGNALS:
        return _LIMIT_SIGNALS[res.signal]
    low = res.output.lower()
    return next((cause for text, cause in _LIMIT_TEXTS if text in low), None) if not res.ok else None


def process_failure(res: proc.ProcResult, what: str, kind_on_exit: ErrorKind = ErrorKind.EXIT_CODE) -> StageFailure | None:
    """The failure a finished process stands for, or None if it succeeded: a timeout, a verdict of the runner's
    own checks (exit 4: VERIFY_MISMATCH ``input_modified``; exit 5: RUNTIME_CRASH ``threads_left``; exit 6, timing
    runs only: VERIFY_MISMATCH ``timed_output_mismatch``; exit 7: RUNTIME_CRASH ``processes_left``; exit 8: RUNTIME_CRASH
    ``forbidden``, a stamp lost or stderr replaced; exit 9 or death by SIGSYS: RUNTIME_CRASH ``forbidden``, a system
    call the runner's seccomp filter refuses; exit 10: RUNTIME_CRASH ``limit``, the memory limit), a resource
    limit (error kind ``limit``, the message names it), a signal, or an exit status."""
    tail = res.stderr.strip()[-1500:] or res.stdout.strip()[-1500:]
    if res.timed_out:
        return StageFailure(Status.RUNTIME_TIMEOUT, ErrorKind.TIMEOUT, f"{what} timed out after {res.wall_s:.1f} s")
    if res.signal is None and res.returncode in _RUNNER_VERDICTS and not res.full:  # the runner's own checks
        status, kind = _RUNNER_VERDICTS[res.returncode]
        return StageFailure(status, kind, f"{what} exit {res.returncode}: {tail}")
    if res.signal is None and res.returncode == mrunner.EXIT_MEMORY_LIMIT:
        return _memory_limit_failure(res, what, tail)
    if res.signal == signal.SIGSYS:  # the filter's trap with SIGSYS blocked: the kernel's default action
        return StageFailure(Status.RUNTIME_CRASH, ErrorKind.FORBIDDEN, f"{what} killed by SIGSYS: a system call "
                            f"the runner's seccomp filter refuses, with the signal blocked: {tail}",
                            signal=res.signal)
    cause = limit_cause(res)
    if cause is not None:
        how = f"signal {res.signal}" if res.signal is not None else f"exit {res.returncode}"
        return StageFailure(Status.RUNTIME_CRASH, ErrorKind.LIMIT, f"{what} stopped by {cause} ({how}): {tail}",
                            signal=res.signal)
    if res.signal is not None:
        return StageFailure(
            Status.RUNTIME_CRASH, ErrorKind.SIGNAL, f"{what} killed by signal {res.signal}: {tail}", signal=res.signal
        )
    if res.returncode != 0:
        low = tail.lower()
        if "input" in low or "output" in low:
            return StageFailure(
                Status.VERIFY_MISMATCH, ErrorKind.GRAPH, f"{what} exit {res.returncode}: {tail}"
            )
        return StageFailure(Status.RUNTIME_CRASH, kind_on_exit, f"{what} exit {res.returncode}: {tail}")
    return None


def protocol_failure(exc: mrunner.RunnerProtocolError, what: str) -> StageFailure:
    """The failure of a runner of the candidate's that broke its protocol (``what`` names the run): candidate
    code that called ``exit()`` or corrupted the runner's state (RUNTIME_CRASH, ``exit_code``), or planted a
    link, a FIFO or an oversized file where the kit reads the runner's outputs (RUNTIME_CRASH, ``forbidden``:
    the runner writes none of those; a link to ``/dev/zero`` had the kit read until memory ran out)."""
    if isinstance(exc, mrunner.PlantedOutputError):
        return StageFailure(Status.RUNTIME_CRASH, ErrorKind.FORBIDDEN, f"{what}: the candidate's code planted what the "
                            f"runner never writes in its output directory: {exc}")
    return StageFailure(Status.RUNTIME_CRASH, ErrorKind.EXIT_CODE, f"{what}: runner broke its protocol: {exc}")
