"""Run the kit's own runner (``runner/mkb_runner.cpp``; compiled by :mod:`kit.mnn.runner_build`; each invocation
prepared by :mod:`kit.mnn.runcall`; what it leaves read by :mod:`kit.mnn.runresult`: the names of the three are
re-exported here) on converted models (:mod:`kit.mnn.convert`).

The runner protocol (also implemented by the fixture engine)::

    mkb_runner <model_file> <in_dir> <out_dir> --outputs y[,z] [--threads N] [--precision high|normal|low]
               [--warmup W] [--iterations N] [--op-types A,B|*] [--wait-go 0|1] [--checked K] [--pid-ns 0|1]

Inputs and outputs are tensor directories (:mod:`kit.mnn.tensorio`).  ``in_dir`` is one input set (a tensor
directory; outputs go to ``out_dir``) or several, ``in_dir/0/``, ``in_dir/1/``, ... (outputs of set k go to
``out_dir/k/``), all with the same tensors.  ``--iterations 0`` runs one forward per set, in order, and writes
each set's outputs; ``--iterations N`` (N >= the number of sets S) runs ``--warmup`` untimed and N timed
forwards: timed forward i < S on set i, whose outputs it writes to ``out_dir/<i>/``; every other timed
forward on *fresh inputs*, derived from the sets before it, and the warm-ups on one derived for them (every
tensor a random sample of the sets'
values, ``runner/mkb_fresh.hpp``), so no input repeats; ``--checked K`` of those timed forwards, picked at
random after each forward, it writes to ``out_dir/checked/<j>/out/`` with the pool indices of their inputs'
units in ``.../draw/`` (int32), from which the kit rebuilds the inputs with its own sets to compare with ONNX
Runtime (:mod:`kit.mnn.fresh`; the fixture engine's runner writes the inputs themselves, ``.../in/``).  A float32 output of a timed forward that still holds the poison (below) is
exit :data:`EXIT_TIMED_OUTPUT_CHANGED`.  It writes ``timing.json`` with
``op_ms`` (sum of the selected op types' times per run), ``total_ms`` (whole forward per run), ``op_types``
(ops executed per run, by type), ``phase_ms`` (wall time from reading "go" to the end of the timed forwards)
and ``checked`` (the 1-based numbers of the timed forwards written out).
Every time is CLOCK_MONOTONIC read by the system call itself, never through libc, whose clock functions the
candidate's ``libMNN.so`` could replace for the whole process.  Each reading a sample is made of is also
*streamed*: in every timed forward the runner writes, by the write system call itself, on stderr, before any
candidate code runs again, ``@mkbt F <i> <ns> <cpu>`` (the forward's begin: read, written, then the forward),
``@mkbt b <ns> <Type>`` / ``@mkbt e <ns>`` (every op's begin with its type, and its end, in the before/after-op
callbacks: the kit selects the ``--op-types`` ops and counts the ops per type from the stream) and
``@mkbt E <i> <ns> <cpu>`` (its end); ``<ns>`` integer nanoseconds in hex, ``<i>`` the 1-based timed forward,
``<cpu>`` the main thread's CPU time (CLOCK_THREAD_CPUTIME_ID, hex nanoseconds; :mod:`kit.stages.accounting`).  The kit
parses the lines out of stderr (:mod:`kit.mnn.stamps`), rebuilds ``total_ms`` and ``op_ms`` from them and refuses a
``timing.json`` that disagrees (``RunResult.stamp_error``): the candidate's code runs in the runner's address
space and could edit its arrays of times, never what is already in the pipe.  A stamp not written whole, or a
stderr that is no longer the file it was at the start (checked after every end stamp), is exit
:data:`EXIT_STAMP_LOST`.  With ``--wait-go 1`` the runner loads the model
and reads the inputs, prints ``mkb_runner: ready`` on stdout and waits for the line ``go`` on stdin
(:func:`start_model`: the start-up happens before a timing phase, the runs inside it).

Around every forward the runner fills the previous forward's output memory with 0xFF bytes (NaN; MNN's
StaticModule reuses it for the next forward), then checks that every input tensor still holds its bytes and
that the process has no more threads than the engine's own (MNN: the main thread and ``threads - 1`` pool
workers; a thread already exiting, as a joined one is for a moment after the join, is not counted), and that no process exists besides the runner (its children and their children, whose subreaper it
is, and, with ``--pid-ns 1``, which the kit passes whenever the runner runs in the sandbox's PID namespace, any
process but the sandbox's init, whose child the runner must be).  The runner leaves by the
exit_group system call right after writing its results (and on every
error), so no destructor or atexit handler of the candidate's library runs after them.  Once its start-up is
done (model loaded, thread pool made, output directory opened) and before the first forward, the runner installs
a seccomp filter (``runner/mkb_lockdown.hpp``) that refuses the system calls no kernel needs (signal handlers,
descriptor moves, processes, files created outside its output directory, memory made unreadable or executable,
...): a refused call is exit :data:`EXIT_FORBIDDEN_CALL` with one line naming it on stderr (or death by SIGSYS
when the candidate blocked that signal), and a mapping larger than the address space the memory limit leaves
is exit :data:`EXIT_MEMORY_LIMIT`; where seccomp is missing (qemu-user) it prints a note and goes on.  Exit status 0 is
success, 2 a usage error (a kit bug), 3 a load/shape/run error, :data:`EXIT_INPUT_MODIFIED` (4) a forward that
wrote into an input, :data:`EXIT_THREADS_LEFT` (5) a thread left running after a forward,
:data:`EXIT_TIMED_OUTPUT_CHANGED` (6) a timed forward that left an output unwritten,
:data:`EXIT_PROCESS_LEFT` (7) a process besides the runner after a forward, :data:`EXIT_STAMP_LOST` (8) a stamp
lost or stderr replaced, :data:`EXIT_FORBIDDEN_CALL` (9) a system call its filter refuses,
:data:`EXIT_MEMORY_LIMIT` (10) an allocation beyond the memory limit; a crash is a signal.

Nothing here turns a failure into a record status: results carry ``ok`` and the :class:`~kit.host.proc.ProcResult`;
exceptions are raised only for faults of the kit itself (:class:`RunnerBuildError`, :class:`RunnerProtocolError`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kit.host import proc
from kit.mnn.runcall import (
    LOG_LIMIT,
    PRECISIONS,
    TIMING_LOG_LIMIT,
    RemoteRunner,
    RunnerCall,
    RunSettings,
    StartedRun,
    runner_env,
)
from kit.mnn.runinputs import Inputs, WrittenInputs, input_sets, write_inputs
from kit.mnn.runner_build import (
    CXX_FLAGS,
    RUNNER_FILES,
    RUNNER_SOURCE,
    RunnerBuildError,
    build_runner,
    runner_key,
)
from kit.mnn.runresult import (
    EXIT_FORBIDDEN_CALL,
    EXIT_INPUT_MODIFIED,
    EXIT_MEMORY_LIMIT,
    EXIT_PROCESS_LEFT,
    EXIT_RUN_ERROR,
    EXIT_STAMP_LOST,
    EXIT_THREADS_LEFT,
    EXIT_TIMED_OUTPUT_CHANGED,
    EXIT_USAGE,
    CheckedForward,
    PlantedOutputError,
    RunnerProtocolError,
    RunResult,
)

__all__ = ["CXX_FLAGS", "CheckedForward", "EXIT_FORBIDDEN_CALL", "EXIT_INPUT_MODIFIED", "EXIT_MEMORY_LIMIT",
           "EXIT_PROCESS_LEFT", "EXIT_RUN_ERROR", "EXIT_STAMP_LOST", "EXIT_THREADS_LEFT",
           "EXIT_TIMED_OUTPUT_CHANGED", "EXIT_USAGE", "Inputs", "LOG_LIMIT", "PRECISIONS", "PlantedOutputError",
           "READY_LINE", "RUNNER_FILES", "RUNNER_SOURCE", "RemoteRunner", "RunResult", "RunSettings",
           "RunnerBuildError", "RunnerCall", "RunnerProtocolError", "StartedRun", "TIMING_LOG_LIMIT",
           "WrittenInputs", "build_runner", "input_sets", "run_model", "runner_env", "runner_key", "start_model",
           "write_inputs"]


def run_model(
    runner: Path,
    model: Path,
    inputs: Inputs | WrittenInputs,
    output_names: Sequence[str],
    lib_dir: Path | None = None,
    settings: RunSettings = RunSettings(),
    *,
    scratch: Path,
) -> RunResult:
    """Run ``model`` once (``settings.iterations = 0``) or ``warmup`` + ``iterations`` times with ``runner``.

    Args:
        inputs: graph input name → array, in the model's input order; int64/bool/other integer arrays are sent
            as int32, float32 as is (other float dtypes are refused).  A sequence of such mappings is several
            input sets, run in order in the one process (``in_dir/<k>/``); timing mode alternates between them
            and needs ``settings.iterations`` >= their number.  Or inputs already written
            (:class:`WrittenInputs`, :func:`write_inputs`), which the runner reads where they are.
        output_names: the graph outputs to fetch, in order.
        lib_dir: a directory holding another ``libMNN.so`` (and optionally ``express/``) to run against;
            None = the libraries the runner was linked with.
        settings: threads, precision, warm-up and timed iterations, op types, timeout, memory limit, the base
            environment (``settings.env``; default :func:`kit.host.proc.base_env`; ``LD_LIBRARY_PATH`` is set
            from ``lib_dir``).
        scratch: a directory of this call's own; ``scratch/out`` is recreated, and ``scratch/in`` with the inputs
            unless they are written already.
    Returns:
        a :class:`RunResult`; ``ok`` False for a runner error (exit 3), a changed input (4), a thread left
        running (5), a signal or a timeout.
    Raises:
        ValueError: bad arguments (precision, counts, names, dtypes).
        FileNotFoundError: the runner, the model or ``lib_dir/libMNN.so`` is missing.
        RunnerProtocolError: the runner rejected its command line or wrote incomplete results.
    """
    call = RunnerCall.prepare(runner, model, inputs, output_names, lib_dir, settings, scratch=scratch)
    if settings.remote is not None:
        started = settings.remote.start(call)
        return started.go() if isinstance(started, StartedRun) else started
    result = proc.run(call.command, cwd=call.scratch, env=call.env, timeout_s=settings.timeout_s,
                      memory_limit_bytes=settings.memory_limit_bytes, cpus=settings.cpus, confine=call.confine,
                      log_limit=call.log_limit, **call.keep)
    return call.finish(result)


#: the line the runner prints on stdout at its rendezvous (``--wait-go 1``)
READY_LINE = "mkb_runner: ready"


def start_model(
    runner: Path,
    model: Path,
    inputs: Inputs | WrittenInputs,
    output_names: Sequence[str],
    lib_dir: Path | None = None,
    settings: RunSettings = RunSettings(),
    *,
    scratch: Path,
) -> StartedRun | RunResult:
    """:func:`run_model` in two halves: start the runner with ``--wait-go 1`` and return once it has loaded the
    model and read the inputs (a :class:`StartedRun`; its :meth:`StartedRun.go` runs the rest), or the
    :class:`RunResult` of a runner that failed before (``ok`` False).  ``settings.timeout_s`` applies to each
    half.

    Raises:
        what :func:`run_model` raises.
    """
    call = RunnerCall.prepare(runner, model, inputs, output_names, lib_dir, settings, scratch=scratch)
    if settings.remote is not None:
        return settings.remote.start(call)
    started = proc.start([*call.command, "--wait-go", "1"], ready_line=READY_LINE, cwd=call.scratch, env=call.env,
                         timeout_s=settings.timeout_s, memory_limit_bytes=settings.memory_limit_bytes,
                         cpus=settings.cpus, confine=call.confine, log_limit=call.log_limit, cpu_account=True, **call.keep)
    if isinstance(started, proc.ProcResult):
        return call.finish(started)
    return StartedRun(call, started, settings.timeout_s)
