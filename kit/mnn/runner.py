"""Run the kit's own runner (``runner/mkb_runner.cpp``; compiled by :mod:`kit.mnn.runner_build`; what it leaves
read by :mod:`kit.mnn.runresult`: the names of both are re-exported here) on converted models
(:mod:`kit.mnn.convert`).

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

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kit.host import machine as hostinfo
from kit.host import proc, sandbox
from kit.mnn import stamps, tensorio
from kit.mnn.runinputs import Inputs, WrittenInputs, count_sets, input_sets, reset_dir, write_inputs
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
    TIMING_FILE,
    CheckedForward,
    PlantedOutputError,
    RunnerProtocolError,
    RunResult,
    check_caps,
    read_checked,
    read_outputs,
    read_timing,
)

__all__ = ["CXX_FLAGS", "CheckedForward", "EXIT_FORBIDDEN_CALL", "EXIT_INPUT_MODIFIED", "EXIT_MEMORY_LIMIT",
           "EXIT_PROCESS_LEFT", "EXIT_RUN_ERROR", "EXIT_STAMP_LOST", "EXIT_THREADS_LEFT",
           "EXIT_TIMED_OUTPUT_CHANGED", "EXIT_USAGE", "Inputs", "PlantedOutputError", "RUNNER_FILES",
           "RUNNER_SOURCE", "RunResult", "RunnerBuildError", "RunnerProtocolError", "WrittenInputs", "build_runner",
           "input_sets", "runner_key", "write_inputs"]

#: bytes of stamp lines kept of a timing run's stderr (kit.host.proc's ``keep_bytes``): a line is ~21 bytes, two per
#: timed op, so 100 ops x 40 forwards make ~170 KB; lines beyond it are lost, a stamp error (kit.mnn.stamps)
TIMING_LOG_LIMIT = 16 << 20
#: bytes kept of the rest of a runner's stdout and of its stderr (head and tail; kit.host.proc's ``log_limit``)
LOG_LIMIT = 256 * 1024
PRECISIONS = ("high", "normal", "low")


class RemoteRunner(Protocol):
    """Runs prepared runner invocations on another machine (an Android device over adb:
    :class:`kit.devices.session.DeviceSession`) instead of this one: :func:`start_model` and :func:`run_model`
    hand it the :class:`_Call` (argv, files and directories as prepared here) when ``RunSettings.remote`` is
    set.  Its errors are its own (:class:`kit.devices.errors.DeviceError`)."""

    #: names the machine in the invocation digest (the same for both sides of a timing)
    label: str

    def start(self, call: _Call) -> StartedRun | RunResult:
        """As :func:`start_model` for the prepared ``call``, on that machine."""
        ...

    def conditions(self, cores: tuple[int, ...]) -> dict[str, object]:
        """The conditions of a timing phase on that machine, read inside it: the
        :class:`kit.results.outcomes.TimingOutcome` fields ``governor``, ``freq_mhz``, ``load_1m``, ``device`` and
        ``emulated``."""
        ...


# ---------------------------------------------------------------------------------------------- run


def runner_env(lib_dir: Path | None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for the runner: ``base`` (default :func:`kit.host.proc.base_env`) plus, when ``lib_dir`` is
    given, ``LD_LIBRARY_PATH=lib_dir[:lib_dir/express]`` so its ``libMNN.so`` (and ``libMNN_Express.so``) are
    loaded instead of the ones in the runner's RUNPATH."""
    env = dict(base) if base is not None else proc.base_env()
    if lib_dir is not None:
        lib_dir = Path(lib_dir).resolve()
        if not (lib_dir / "libMNN.so").is_file():
            raise FileNotFoundError(f"{lib_dir}/libMNN.so not found")
        dirs = [str(lib_dir)]
        if (lib_dir / "express").is_dir():
            dirs.append(str(lib_dir / "express"))
        env["LD_LIBRARY_PATH"] = ":".join(dirs)
    else:
        env.pop("LD_LIBRARY_PATH", None)
    return env


@dataclass(frozen=True)
class RunSettings:
    """How the runner is invoked besides the model, its inputs and the libraries: what native and candidate
    runs must share.

    ``threads``: MNN CPU threads; ``precision``: MNN BackendConfig precision (``high`` is fp32 on CPU);
    ``warmup`` untimed then ``iterations`` timed forward passes (``iterations = 0``: one run, outputs only);
    ``op_types``: MNN op type names whose times make ``op_ms`` (``"*"`` = every op); ``timeout_s``: seconds
    (each half for :func:`start_model`); ``memory_limit_bytes``: RLIMIT_AS of the runner process (None: none);
    ``cpus``: the CPU cores the runner is pinned to (empty: not pinned); ``checked``: timed forwards on fresh inputs the runner
    writes out per run, picked at random (``--checked``; 0: none, the flag left out); ``policy``: how it is confined (the
    runner executes candidate code: :mod:`kit.host.sandbox`; it sees the runner, the libraries, the model and its
    input directory read-only and writes only its output directory); ``emulator``: the command prefix that runs
    the runner (a cross build's: ``qemu-aarch64-static -L SYSROOT``, :func:`kit.mnn.toolchain.emulator`; empty:
    run directly); ``extra_threads``: threads the runner's thread check allows besides the engine's (the
    emulator's own, :data:`kit.mnn.toolchain.EMULATOR_THREADS`); ``runner_label``: names the runner in the
    invocation digest instead of its path, where each side has a runner of its own built the same way (a static
    build links the side's engine into it; empty: the path); ``remote``: the machine that runs the runner
    (:class:`RemoteRunner`; None: this one, through :mod:`kit.host.proc`); ``env``: the base environment of the
    runner process (None: :func:`kit.host.proc.base_env`; ``LD_LIBRARY_PATH`` is set from the libraries either
    way; not compared, like ``remote``: the environment the runner gets is in the invocation digest);
    ``outputs``: a timing run's outputs and checked forwards are brought back and read (False: its times alone,
    the result's outputs, output sets and checked forwards empty: the native side of a timing, whose outputs
    nothing compares; not compared, and not in the invocation digest: it changes nothing the runner does).
    """

    threads: int = 1
    precision: str = "high"
    warmup: int = 0
    iterations: int = 0
    op_types: tuple[str, ...] = ("*",)
    timeout_s: float = 120.0
    memory_limit_bytes: int | None = None
    cpus: tuple[int, ...] = ()
    policy: sandbox.Policy = sandbox.Policy()
    emulator: tuple[str, ...] = ()
    extra_threads: int = 0
    runner_label: str = ""
    checked: int = 0
    remote: RemoteRunner | None = field(default=None, compare=False)
    env: Mapping[str, str] | None = field(default=None, compare=False)
    outputs: bool = field(default=True, compare=False)


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
    call = _Call.prepare(runner, model, inputs, output_names, lib_dir, settings, scratch=scratch)
    if settings.remote is not None:
        started = settings.remote.start(call)
        return started.go() if isinstance(started, StartedRun) else started
    result = proc.run(call.command, cwd=call.scratch, env=call.env, timeout_s=settings.timeout_s,
                      memory_limit_bytes=settings.memory_limit_bytes, cpus=settings.cpus, confine=call.confine,
                      log_limit=call.log_limit, **call.keep)
    return call.finish(result)


#: environment variables whose values depend on the caller's session, not on the run (left out of digests)
_HOST_ENV = frozenset({"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL"})

#: the line the runner prints on stdout at its rendezvous (``--wait-go 1``)
READY_LINE = "mkb_runner: ready"


@dataclass
class StartedRun:
    """A runner :func:`start_model` left at its rendezvous (model loaded, inputs read); :meth:`go` runs it."""

    call: _Call
    waiting: proc.Waiting
    timeout_s: float

    @property
    def invocation_sha256(self) -> str:
        """See :meth:`_Call.invocation_sha256`."""
        return self.call.invocation_sha256(self.timeout_s)

    def go(self) -> RunResult:
        """Warm-up and timed runs now; the same result and errors as :func:`run_model`."""
        return self.call.finish(self.waiting.go(timeout_s=self.timeout_s))

    def cancel(self) -> None:
        """Kill the waiting runner (idempotent)."""
        self.waiting.cancel()

    def allowed_cores(self) -> tuple[int, ...] | None:
        """The cores the waiting runner may run on (None where unreadable: gone, or on another machine)."""
        # behind a container bridge: the command's own pid (kit.host.proc.command_pid)
        return None if self.call.settings.remote is not None else hostinfo.allowed_cores(proc.command_pid(self.waiting.pid))


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
    call = _Call.prepare(runner, model, inputs, output_names, lib_dir, settings, scratch=scratch)
    if settings.remote is not None:
        return settings.remote.start(call)
    started = proc.start([*call.command, "--wait-go", "1"], ready_line=READY_LINE, cwd=call.scratch, env=call.env,
                         timeout_s=settings.timeout_s, memory_limit_bytes=settings.memory_limit_bytes,
                         cpus=settings.cpus, confine=call.confine, log_limit=call.log_limit, cpu_account=True, **call.keep)
    if isinstance(started, proc.ProcResult):
        return call.finish(started)
    return StartedRun(call, started, settings.timeout_s)


def _reads_outputs(settings: RunSettings, iterations: int) -> bool:
    """Whether a run's outputs and checked forwards are brought back and read: always in verify mode
    (``iterations`` 0: they are what it is for); in timing mode as ``settings.outputs`` says."""
    return settings.outputs or not iterations


@dataclass
class _Call:
    """One runner invocation, prepared: its argv, environment and directories."""

    argv: list[str]
    env: dict[str, str]
    scratch: Path
    out_dir: Path
    output_names: tuple[str, ...]
    iterations: int
    settings: RunSettings = RunSettings()
    confine: sandbox.Confinement | None = None
    #: the number of input sets in ``in/<k>/`` (None: one set in ``in/`` itself)
    n_sets: int | None = None

    @property
    def read_outputs(self) -> bool:
        """:func:`_reads_outputs` of this call."""
        return _reads_outputs(self.settings, self.iterations)

    @property
    def log_limit(self) -> int:
        """Bytes of each of stdout and stderr to keep besides the stamp lines (:data:`LOG_LIMIT`)."""
        return LOG_LIMIT

    @property
    def keep(self) -> dict[str, object]:
        """The options of :func:`kit.host.proc.run` that keep a timing run's stamp lines whole
        (:data:`TIMING_LOG_LIMIT` bytes of them per stream) while the rest is cut to :attr:`log_limit`."""
        return {"keep_lines": stamps.PREFIX, "keep_bytes": TIMING_LOG_LIMIT if self.iterations else 0}

    @property
    def command(self) -> list[str]:
        """The command line that runs :attr:`argv` (behind the emulator, when there is one)."""
        return [*self.settings.emulator, *self.argv]

    def invocation_sha256(self, timeout_s: float | None = None) -> str:
        """sha256 (hex) of this invocation without what may differ between the sides of a comparison: the
        model and the input/output directories (positional arguments) and ``LD_LIBRARY_PATH`` (the libraries)
        are left out, and so are the values of :data:`_HOST_ENV` (where the caller's shell has them: they differ
        between sessions, never between the sides); the runner, every flag, the rest of the environment and the
        process settings (timeout, memory limit, cores, confinement, emulator) are in; the runner is named by
        ``settings.runner_label`` where each side has its own.  Native and candidate runs of one timing must have
        the same digest."""
        canonical = {
            "runner": self.settings.runner_label or self.argv[0],
            "flags": self.argv[4:],
            "env": {k: ("" if k in _HOST_ENV else v) for k, v in sorted(self.env.items()) if k != "LD_LIBRARY_PATH"},
            "timeout_s": self.settings.timeout_s if timeout_s is None else timeout_s,
            "memory_limit_bytes": self.settings.memory_limit_bytes,
            "cpus": list(self.settings.cpus),
            "policy": repr(self.settings.policy),
            **({"emulator": list(self.settings.emulator)} if self.settings.emulator else {}),
            **({"remote": self.settings.remote.label} if self.settings.remote is not None else {}),
        }
        return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()

    @classmethod
    def prepare(
        cls, runner: Path, model: Path, inputs: Inputs | WrittenInputs, output_names: Sequence[str],
        lib_dir: Path | None, settings: RunSettings, *, scratch: Path,
    ) -> _Call:
        """Check the arguments, recreate ``scratch/in`` (with the inputs, unless they are :class:`WrittenInputs`) and
        ``scratch/out``; the environment is ``settings.env`` with ``lib_dir``'s libraries (:func:`runner_env`).

        Raises:
            as :func:`run_model`."""
        runner, model, scratch = Path(runner), Path(model), Path(scratch)
        threads, precision, op_types = settings.threads, settings.precision, settings.op_types
        warmup, iterations = settings.warmup, settings.iterations
        if precision not in PRECISIONS:
            raise ValueError(f"precision {precision!r} not in {PRECISIONS}")
        if threads < 1 or warmup < 0 or iterations < 0:
            raise ValueError(f"threads={threads}, warmup={warmup}, iterations={iterations}: out of range")
        if not output_names or not op_types:
            raise ValueError("output_names and op_types must not be empty")
        written = inputs if isinstance(inputs, WrittenInputs) else None
        n_sets = written.n_sets if written is not None else count_sets(inputs)
        if n_sets is not None and 0 < iterations < n_sets:
            raise ValueError(f"iterations={iterations}: fewer than the {n_sets} input sets")
        for name in output_names:
            tensorio.check_name(name)
        for t in op_types:
            if not re.fullmatch(r"\*|[A-Za-z0-9_]+", t):
                raise ValueError(f"op type {t!r} is not an MNN op type name")
        for path, what in ((runner, "runner"), (model, "model")):
            if not path.is_file():
                raise FileNotFoundError(f"{what} {path} not found")
        out_dir = scratch / "out"
        if written is None:
            written = write_inputs(inputs, scratch / "in")  # type: ignore[arg-type]
        in_dir = written.dir
        reset_dir(out_dir)
        argv = [
            str(runner.resolve()), str(model.resolve()), str(in_dir.resolve()), str(out_dir.resolve()),
            "--outputs", ",".join(output_names), "--threads", str(threads), "--precision", precision,
            "--warmup", str(warmup), "--iterations", str(iterations), "--op-types", ",".join(op_types),
        ]  # fmt: skip
        if settings.extra_threads:
            argv += ["--extra-threads", str(settings.extra_threads)]
        if settings.checked and iterations:
            argv += ["--checked", str(settings.checked)]
        # the emulator and its sysroot (its absolute arguments) lie under /usr, which every sandbox shows: named
        # anyway, for an emulator installed elsewhere
        emulator = [a for a in settings.emulator if a.startswith("/")]
        confine = settings.policy.confine(ro=[runner, model, in_dir, *sandbox.lib_dirs(lib_dir), *emulator],
                                          bounded=[out_dir], step=f"runner {runner}",
                                          bring_back=None if _reads_outputs(settings, iterations) else (TIMING_FILE,))
        if confine.view is not None and settings.remote is None:
            # the sandbox's PID namespace: the runner lists /proc (it cannot tell from bubblewrap's own /proc,
            # whose NSpid line shows one level)
            argv += ["--pid-ns", "1"]
        return cls(argv, runner_env(lib_dir, settings.env), scratch, out_dir, tuple(output_names), iterations, settings,
                   confine, n_sets)

    def finish(self, result: proc.ProcResult) -> RunResult:
        """The :class:`RunResult` of the finished runner (outputs and timing files read; in timing mode its
        samples rebuilt from the stamp stream, :func:`kit.mnn.stamps.samples`)."""
        result, lines = stamps.take_out(result)
        if result.returncode == EXIT_USAGE and not result.timed_out:
            raise RunnerProtocolError(f"runner rejected its arguments: {result.stderr.strip()}")
        if not result.ok:
            # MNN prints its own diagnostics ("Compute Shape Error for y") on stdout, the runner's on stderr
            return RunResult(False, {}, [], [], {}, result.output.strip(), result)
        check_caps(self.out_dir)
        dirs = [self.out_dir] if self.n_sets is None else [self.out_dir / str(k) for k in range(self.n_sets)]
        sets = tuple(read_outputs(d, self.out_dir, self.output_names) for d in dirs) if self.read_outputs else ()
        if self.iterations == 0:
            return RunResult(True, sets[0], [], [], {}, "", result, None, sets)
        timing_path = self.out_dir / TIMING_FILE
        t = read_timing(timing_path, self.iterations, self.out_dir)
        checked = read_checked(t.checked, self.out_dir, n_sets=self.n_sets or 1, checked=self.settings.checked,
                               iterations=self.iterations) if self.read_outputs else ()
        op_ms, total_ms, op_counts, stamp_error, cpu_ns = stamps.samples(lines, t, self.iterations,
                                                                         self.settings.op_types)
        return RunResult(True, sets[0] if sets else {}, op_ms, total_ms, op_counts, "", result, timing_path, sets,
                         t.phase_ms, checked, t.written_ms, stamp_error, cpu_ns=cpu_ns)

