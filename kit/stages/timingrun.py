"""One timing run of :mod:`kit.stages.timing`: started up to the runner's rendezvous (:func:`start_run`), let go
inside the node's timing phase (:func:`go_run`), and what it must show to count: no failure (:func:`check_run`,
whose side decides the status), no broken protocol, and a clock that agrees with the kit's (:func:`check_clock`:
``clock_mismatch``).  A failure of the candidate's runner is never ``timing_failed`` (which counts as correct):
whatever fails in its process is the candidate's doing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from kit.mnn import runner as mrunner
from kit.results.outcomes import StageFailure
from kit.results.records import ErrorKind, Status
from kit.stages import accounting
from kit.stages.runfailure import process_failure, protocol_failure
from kit.stages.verify import SideModel
from kit.suite.tasks import Task


class AsymmetricTiming(Exception):
    """The two sides of a timing did not run alike (other runner settings, other cores): a fault of the kit,
    never the candidate's (the pipeline records a ``harness_error``)."""


def check_symmetric(plan: list[tuple[str, int]], started: list[mrunner.StartedRun], cores: tuple[int, ...]) -> dict[str, str]:
    """The invocation digest of each side (``{"native": sha, "candidate": sha}``) after checking that every
    run of both sides has the same one, and that each runner is allowed exactly ``cores`` (where that can be
    read).

    Raises:
        AsymmetricTiming: the runs differ in anything but their model and libraries, or run elsewhere."""
    digests: dict[str, set[str]] = {}
    for (who, _), run in zip(plan, started):
        digests.setdefault(who, set()).add(run.invocation_sha256)
        allowed = run.allowed_cores() if cores else None
        if allowed is not None and sorted(allowed) != sorted(cores):
            raise AsymmetricTiming(f"the {who} runner (pid {run.waiting.pid}) may run on cores {list(allowed)}, "
                                   f"not only the timing cores {list(cores)}")
    every = set().union(*digests.values())
    if len(every) != 1:
        raise AsymmetricTiming("native and candidate timing runs were invoked differently (runner invocation "
                               f"digests {sorted(digests.get('native', ()))} vs {sorted(digests.get('candidate', ()))})")
    sha = every.pop()
    return {who: sha for who in digests}


#: how much shorter than the kit's own wall time of a run (from writing "go" to the runner's exit) the runner's
#: ``phase_ms`` (from reading "go" to its last timed forward) may be: CLOCK_SLACK_MS plus CLOCK_SLACK_FRACTION of
#: the kit's time.  The gap of honest runs is the runner writing its outputs and exiting: measured with 2 sets,
#: 10 + 30 forwards, on the 2-core dev VM under a load of 5: fixture engine (fx_exp, fx_argmax, fx_transpose;
#: phases of 12-20 ms), 90 runs: median 4.6-5.9 ms, at most 17.5 ms; MNN 3.2.2 (hard_sigmoid_4d, conv2d_1x7,
#: softmax_last_2d, matmul_2d_rect, resize_bilinear_x2, transpose_nchw_to_nhwc; phases of 23-224 ms), 180 runs:
#: median 3.7-14 ms, at most 53 ms.  The fraction covers hosts where everything is slower (emulation).  Since
#: the fresh-input protocol the runners also write the checked forwards' inputs and outputs after the phase (a
#: 4 MB transpose: 262 ms from its last forward to its exit at a load of 5-8), so the runner's ``written_ms``
#: (its clock at the end of those writes) is what is compared now; the gap left is its exit.
CLOCK_SLACK_MS = 100.0
CLOCK_SLACK_FRACTION = 0.10
#: rounding allowed per time the runner printed, ms (the runners print 6 decimals, or 9 significant digits)
_PRINT_MS = 1e-3


def start_run(task: Task, runner: Path, timed: SideModel, inputs: mrunner.Inputs | mrunner.WrittenInputs,
              scratch: Path, settings: mrunner.RunSettings, what: str) -> mrunner.StartedRun:
    """Start one timing run of ``timed``'s model (with ``runner`` unless its side has a runner of its own;
    ``inputs``: the input sets, :data:`kit.mnn.runner.Inputs`, or written already for every run,
    :class:`kit.mnn.runner.WrittenInputs`; ``scratch``: the run's own directory;
    ``settings``: :meth:`kit.stages.timing.TimingOptions.settings`; ``what``: "native" or "candidate") up to the
    runner's rendezvous (model loaded, inputs read).

    Raises:
        StageFailure: as :func:`check_run` when the runner fails before it (or breaks its protocol:
            :func:`_protocol`).
    """
    with _protocol(what):
        side = timed.side
        # the native side's outputs are never compared: only its times come back
        started = mrunner.start_model(side.runner or runner, timed.model, inputs, [o.name for o in task.outputs],
                                      side.lib_dir, replace(settings, outputs=what != "native"), scratch=scratch)
    if isinstance(started, mrunner.RunResult):
        check_run(started, what)
        status = Status.TIMING_FAILED if what == "native" else Status.RUNTIME_CRASH
        raise StageFailure(status, ErrorKind.EXIT_CODE, f"{what} timing run: the runner exited (status 0) before "
                           f"its rendezvous")
    return started


@dataclass(frozen=True)
class Ran:
    """A finished timing run: its ``result`` (None where the runner's results could not be read: a broken
    protocol) and its ``failure``, why it does not count (None: it does).  The timing stage compares the
    candidate's timed outputs of every run with a result before it raises any failure."""

    result: mrunner.RunResult | None
    failure: StageFailure | None


def go_run(started: mrunner.StartedRun, iterations: int, what: str, round_: int | None = None) -> Ran:
    """Run a started timing run (warm-up and ``iterations`` timed forwards; ``round_`` names it in messages) and
    say why it does not count, without raising it: a failure of the run (:func:`check_run`, :func:`_protocol`), a
    wrong number of samples, or a clock that cannot be trusted: the stamp stream the runner wrote on stderr as it
    took its times, which its samples are rebuilt from and ``timing.json`` must agree with (:mod:`kit.mnn.stamps`:
    a candidate that edited the times in the runner's memory, forged stamp lines or flooded stderr until stamps
    were lost), then :func:`check_clock` (the kit's own time of the run is ``proc.wall_s``, from writing "go" to
    the exit).

    The failure of the candidate's runner is never TIMING_FAILED (which counts as correct): RUNTIME_CRASH /
    RUNTIME_TIMEOUT / VERIFY_MISMATCH as :func:`check_run` and :func:`_protocol` say, RUNTIME_CRASH (``exit_code``)
    for a wrong number of samples, RUNTIME_CRASH (``clock_mismatch``) for its clock: only its process wrote its
    stream and its times.  The native runner's: TIMING_FAILED, HARNESS_ERROR for a clock mismatch (the pristine
    libraries: the host stalled or the kit is wrong)."""
    try:
        with _protocol(what):
            cpu_go_s = accounting.cpu_at_go(started)
            res = replace(started.go(), cpu_go_s=cpu_go_s)
    except StageFailure as exc:
        return Ran(None, exc)
    return Ran(res, run_failure(res, iterations, what, round_))


def run_failure(res: mrunner.RunResult, iterations: int, what: str, round_: int | None = None) -> StageFailure | None:
    """Why a finished timing run of ``what`` ("native" or "candidate") does not count, or None (:func:`go_run`
    states the statuses)."""
    try:
        check_run(res, what, round_)
    except StageFailure as exc:
        return exc
    native = what == "native"
    if len(res.op_ms) != iterations:
        return StageFailure(Status.TIMING_FAILED if native else Status.RUNTIME_CRASH,
                            ErrorKind.INTERNAL if native else ErrorKind.EXIT_CODE,
                            f"{what}: {len(res.op_ms)} samples, expected {iterations}")
    wrong = res.stamp_error or check_clock(res.total_ms, res.phase_ms, res.proc.wall_s * 1e3, res.op_ms,
                                           res.written_ms)
    if wrong:
        status = Status.HARNESS_ERROR if native else Status.RUNTIME_CRASH
        return StageFailure(status, ErrorKind.CLOCK_MISMATCH, f"{what} timing run: {wrong}")
    return None


def check_clock(total_ms: list[float], phase_ms: float | None, kit_ms: float,
                op_ms: list[float] | None = None, written_ms: float | None = None) -> str | None:
    """Why a timing run's clock cannot be trusted, or None: the ops timed in each forward (``op_ms``) must fit
    in that forward (``total_ms[i]``: the ops run between the forward's two clock reads), the timed forwards
    (the runner's clock) must fit in its ``phase_ms`` (the same clock, the interval they are part of), which must
    lie within the kit's own wall time ``kit_ms`` of the run and be shorter by no more than
    :data:`CLOCK_SLACK_MS` + :data:`CLOCK_SLACK_FRACTION` of it (all milliseconds); no time is negative.  A
    runner whose clock was slowed, stopped or rewound (code in the candidate's library replacing or patching
    it), or whose timing.json was rewritten, fails one of these where the numbers no longer agree.  (A rewrite
    that scales every time alike keeps them agreeing but for the kit's wall time; that it cannot happen after
    the runner wrote them is the runner's doing: it leaves by exit_group at once.)  With ``written_ms`` (the
    runner's clock when it had written its results, timing.json last) the kit's time is compared with that
    instead, and ``phase_ms`` must lie within it: writing the outputs on a loaded host is then not taken for
    a slowed clock."""
    if phase_ms is None:
        return "the runner wrote no phase_ms"
    if op_ms is not None:
        if len(op_ms) != len(total_ms) or min(op_ms, default=0.0) < 0:
            return f"{len(op_ms)} op times for {len(total_ms)} forwards, or one is negative"
        over = [i for i, (op, tot) in enumerate(zip(op_ms, total_ms)) if op > tot + 2 * _PRINT_MS]
        if over:
            i = over[0]
            return (f"the timed ops of {len(over)} forwards took longer than the forward they are part of; first: "
                    f"forward {i + 1}, {op_ms[i]:.6f} ms of ops in {total_ms[i]:.6f} ms")
    timed = float(sum(total_ms))
    if timed > phase_ms + _PRINT_MS * (len(total_ms) + 1) or min(total_ms, default=0.0) < 0:
        return (f"its timed forwards add up to {timed:.3f} ms (the runner's clock), more than the {phase_ms:.3f} ms "
                f"of the phase they are part of, or one is negative")
    if phase_ms > kit_ms + 1.0:
        return f"the runner's clock saw {phase_ms:.3f} ms from go to its last forward, the kit's {kit_ms:.3f} ms for all of the run"
    end_ms, until = phase_ms, "its last timed forward"
    if written_ms is not None:
        if written_ms + _PRINT_MS < phase_ms or written_ms > kit_ms + 1.0:
            return (f"the runner's clock saw {written_ms:.3f} ms from go to the end of its writes, not between its "
                    f"phase ({phase_ms:.3f} ms) and the kit's {kit_ms:.3f} ms for all of the run")
        end_ms, until = written_ms, "the end of its writes"
    slack = CLOCK_SLACK_MS + CLOCK_SLACK_FRACTION * kit_ms
    if end_ms < kit_ms - slack:
        return (f"the runner's clock saw {end_ms:.3f} ms from go to {until}, the kit's "
                f"{kit_ms:.3f} ms from go to the runner's exit: more than {slack:.1f} ms apart")
    return None


@contextmanager
def _protocol(what: str) -> Iterator[None]:
    """A runner that breaks its protocol during timing: the candidate's code in it (RUNTIME_CRASH, ``exit_code``
    or ``forbidden``: :func:`kit.stages.runfailure.protocol_failure`); on the native side TIMING_FAILED
    (``exit_code``)."""
    try:
        yield
    except mrunner.RunnerProtocolError as exc:
        if what != "native":
            raise protocol_failure(exc, f"{what} timing run") from None
        raise StageFailure(Status.TIMING_FAILED, ErrorKind.EXIT_CODE, f"{what} timing run: runner broke its "
                           f"protocol: {exc}") from None


def check_run(res: mrunner.RunResult, what: str, round_: int | None = None) -> None:
    """Raise the failure of a finished timing run, if it failed.

    The candidate's runner: as in verification (:func:`kit.stages.runfailure.process_failure`): a signal, a bad
    exit or a limit is RUNTIME_CRASH, a timeout RUNTIME_TIMEOUT, the runner's own verdicts theirs; never
    TIMING_FAILED, which counts as correct: a kernel that traps once it has been verified (wrong after 8 calls,
    crashing instead of returning wrong outputs) scored timing_failed, correct.  The native runner (pristine
    libraries): TIMING_FAILED, the machine's fault (HARNESS_ERROR where its kernels gave other bytes on the
    same inputs: the host or the kit).

    Raises:
        StageFailure: as above."""
    fail = process_failure(res.proc, f"{what} timing run" + (f" (round {round_})" if round_ is not None else ""))
    if fail is None:
        return
    if what != "native":
        raise fail
    status = Status.HARNESS_ERROR if fail.kind == ErrorKind.TIMED_OUTPUT_MISMATCH else Status.TIMING_FAILED
    raise StageFailure(status, fail.kind, fail.message, signal=fail.signal)
