"""One invocation of the kit's runner (:mod:`kit.mnn.runner`): how it is invoked besides its model and inputs
(:class:`RunSettings`, what both sides of a timing share), the call prepared from them (:class:`RunnerCall`: argv,
environment, directories, confinement, the invocation digest, the result read back), a runner left at its
rendezvous (:class:`StartedRun`) and the machine that runs calls elsewhere (:class:`RemoteRunner`)."""

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
from kit.mnn.runinputs import Inputs, WrittenInputs, count_sets, reset_dir, write_inputs
from kit.mnn.runresult import (
    EXIT_USAGE,
    TIMING_FILE,
    RunnerProtocolError,
    RunResult,
    check_caps,
    read_checked,
    read_outputs,
    read_timing,
)

#: bytes of stamp lines kept of a timing run's stderr (kit.host.proc's ``keep_bytes``): a line is ~21 bytes, two per
#: timed op, so 100 ops x 40 forwards make ~170 KB; lines beyond it are lost, a stamp error (kit.mnn.stamps)
TIMING_LOG_LIMIT = 16 << 20
#: bytes kept of the rest of a runner's stdout and of its stderr (head and tail; kit.host.proc's ``log_limit``)
LOG_LIMIT = 256 * 1024
PRECISIONS = ("high", "normal", "low")


class RemoteRunner(Protocol):
    """Runs prepared runner invocations on another machine (an Android device over adb:
    :class:`kit.devices.session.DeviceSession`) instead of this one: :func:`kit.mnn.runner.start_model` and
    :func:`kit.mnn.runner.run_model` hand it the :class:`RunnerCall` (argv, files and directories as prepared here)
    when ``RunSettings.remote`` is set.  Its errors are its own (:class:`kit.devices.errors.DeviceError`)."""

    #: names the machine in the invocation digest (the same for both sides of a timing)
    label: str

    def start(self, call: RunnerCall) -> StartedRun | RunResult:
        """As :func:`kit.mnn.runner.start_model` for the prepared ``call``, on that machine."""
        ...

    def conditions(self, cores: tuple[int, ...]) -> dict[str, object]:
        """The conditions of a timing phase on that machine, read inside it: the
        :class:`kit.results.outcomes.TimingOutcome` fields ``governor``, ``freq_mhz``, ``load_1m``, ``device`` and
        ``emulated``."""
        ...


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
    (each half for :func:`kit.mnn.runner.start_model`); ``memory_limit_bytes``: RLIMIT_AS of the runner process
    (None: none); ``cpus``: the CPU cores the runner is pinned to (empty: not pinned); ``checked``: timed forwards
    on fresh inputs the runner writes out per run, picked at random (``--checked``; 0: none, the flag left out);
    ``policy``: how it is confined (the runner executes candidate code: :mod:`kit.host.sandbox`; it sees the
    runner, the libraries, the model and its input directory read-only and writes only its output directory);
    ``emulator``: the command prefix that runs the runner (a cross build's: ``qemu-aarch64-static -L SYSROOT``, :func:`kit.mnn.toolchain.emulator`; empty:
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


#: environment variables whose values depend on the caller's session, not on the run (left out of digests)
_HOST_ENV = frozenset({"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL"})

@dataclass
class StartedRun:
    """A runner :func:`kit.mnn.runner.start_model` left at its rendezvous (model loaded, inputs read); :meth:`go`
    runs it."""

    call: RunnerCall
    waiting: proc.Waiting
    timeout_s: float

    @property
    def invocation_sha256(self) -> str:
        """See :meth:`RunnerCall.invocation_sha256`."""
        return self.call.invocation_sha256(self.timeout_s)

    def go(self) -> RunResult:
        """Warm-up and timed runs now; the same result and errors as :func:`kit.mnn.runner.run_model`."""
        return self.call.finish(self.waiting.go(timeout_s=self.timeout_s))

    def cancel(self) -> None:
        """Kill the waiting runner (idempotent)."""
        self.waiting.cancel()

    def allowed_cores(self) -> tuple[int, ...] | None:
        """The cores the waiting runner may run on (None where unreadable: gone, or on another machine)."""
        # behind a container bridge: the command's own pid (kit.host.proc.command_pid)
        return None if self.call.settings.remote is not None else hostinfo.allowed_cores(proc.command_pid(self.waiting.pid))


def _reads_outputs(settings: RunSettings, iterations: int) -> bool:
    """Whether a run's outputs and checked forwards are brought back and read: always in verify mode
    (``iterations`` 0: they are what it is for); in timing mode as ``settings.outputs`` says."""
    return settings.outputs or not iterations


@dataclass
class RunnerCall:
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
    ) -> RunnerCall:
        """Check the arguments, recreate ``scratch/in`` (with the inputs, unless they are :class:`WrittenInputs`) and
        ``scratch/out``; the environment is ``settings.env`` with ``lib_dir``'s libraries (:func:`runner_env`).

        Raises:
            as :func:`kit.mnn.runner.run_model`."""
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
