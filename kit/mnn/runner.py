"""Build and run the kit's own runner (``runner/mkb_runner.cpp``) on converted models (:mod:`kit.mnn.convert`).

The runner protocol (also implemented by the fixture engine)::

    mkb_runner <model_file> <in_dir> <out_dir> --outputs y[,z] [--threads N] [--precision high|normal|low]
               [--warmup W] [--iterations N] [--op-types A,B|*] [--wait-go 0|1]

Inputs and outputs are tensor directories (:mod:`kit.tensorio`).  ``--iterations 0`` runs once and writes the
outputs; ``--iterations N`` also writes ``timing.json`` with ``op_ms`` (sum of the selected op types' times per
run), ``total_ms`` (whole forward per run) and ``op_types`` (ops executed per run, by type).  With
``--wait-go 1`` the runner loads the model and reads the inputs, prints ``mkb_runner: ready`` on stdout and waits
for the line ``go`` on stdin (:func:`start_model`: the start-up happens before a timing phase, the runs inside
it).  Exit status 0 is success, 2 a usage error (a kit bug), 3 a load/shape/run error; a crash is a signal.

Nothing here turns a failure into a record status: results carry ``ok`` and the :class:`~kit.proc.ProcResult`;
exceptions are raised only for faults of the kit itself (:class:`RunnerBuildError`, :class:`RunnerProtocolError`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kit import proc, sandbox, tensorio

#: the runner's C++ source, shipped inside the package (it includes ``mkb_io.hpp`` beside it)
RUNNER_SOURCE = Path(__file__).with_name("runner") / "mkb_runner.cpp"
#: every file the runner is compiled from
RUNNER_FILES = (RUNNER_SOURCE, RUNNER_SOURCE.with_name("mkb_io.hpp"))
#: flags of the single compiler invocation (besides include/library paths)
CXX_FLAGS = ("-O2", "-std=c++17", "-pthread")
#: exit status of the runner for a load/shape/run error (2 = usage error)
EXIT_RUN_ERROR = 3
EXIT_USAGE = 2
PRECISIONS = ("high", "normal", "low")



class RunnerBuildError(RuntimeError):
    """The runner did not compile or link; ``proc`` holds the compiler's output."""

    def __init__(self, message: str, result: proc.ProcResult | None = None):
        super().__init__(message)
        self.proc = result


class RunnerProtocolError(RuntimeError):
    """The runner broke its protocol (usage error, missing or malformed output files): a fault of the kit."""


# ---------------------------------------------------------------------------------------------- build


def _libraries(build_dir: Path) -> tuple[Path, Path]:
    mnn = build_dir / "libMNN.so"
    express = build_dir / "express" / "libMNN_Express.so"
    for lib in (mnn, express):
        if not lib.is_file():
            raise FileNotFoundError(
                f"{lib} not found: build the MNN targets MNN and MNN_Express in {build_dir} first"
            )
    return mnn, express


def runner_key(src_root: Path, build_dir: Path, compiler: str = "g++") -> str:
    """sha256 (hex) of everything the runner binary depends on: its sources, the public headers' path, the
    library paths, the compiler and the flags."""
    h = hashlib.sha256()
    for path in RUNNER_FILES:
        h.update(path.read_bytes())
    for part in (
        str(Path(src_root).resolve() / "include"),
        str(Path(build_dir).resolve()),
        compiler,
        *CXX_FLAGS,
    ):
        h.update(b"\0" + part.encode())
    return h.hexdigest()


def build_runner(
    src_root: Path, build_dir: Path, out: Path, timeout_s: float = 120.0, *, compiler: str = "g++"
) -> Path:
    """Compile ``mkb_runner`` against ``src_root/include`` and ``build_dir``'s ``libMNN.so`` and
    ``express/libMNN_Express.so`` with one compiler invocation; the binary's RUNPATH names both library dirs.

    Skipped when ``out`` exists and its key file (``out`` + ``.key``, see :func:`runner_key`) matches.
    The binary is written to a temporary name and renamed, so concurrent builders never see half a file.

    Returns:
        ``out``.
    Raises:
        FileNotFoundError: the headers or the libraries are missing.
        RunnerBuildError: the compiler failed or timed out (message and ``.proc`` carry its output).
    """
    src_root, build_dir, out = Path(src_root).resolve(), Path(build_dir).resolve(), Path(out)
    include = src_root / "include"
    if not (include / "MNN" / "expr" / "Module.hpp").is_file():
        raise FileNotFoundError(
            f"{include}/MNN/expr/Module.hpp not found: {src_root} is not an MNN source tree"
        )
    _libraries(build_dir)
    key = runner_key(src_root, build_dir, compiler)
    key_file = out.with_name(out.name + ".key")
    if out.is_file() and key_file.is_file() and key_file.read_text().strip() == key:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    argv = [
        compiler, *CXX_FLAGS, f"-I{include}", str(RUNNER_SOURCE), "-o", str(tmp),
        f"-L{build_dir}", f"-L{build_dir / 'express'}", "-lMNN_Express", "-lMNN",
        "-Wl,--enable-new-dtags", f"-Wl,-rpath,{build_dir}:{build_dir / 'express'}",
    ]  # fmt: skip
    try:
        result = proc.run(argv, cwd=out.parent, timeout_s=timeout_s)
    except FileNotFoundError as e:
        raise RunnerBuildError(f"compiler {compiler!r} not found") from e
    if not result.ok or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        what = "timed out" if result.timed_out else f"failed (exit {result.returncode})"
        raise RunnerBuildError(f"building mkb_runner {what}:\n{result.output}", result)
    os.replace(tmp, out)
    key_file.write_text(key + "\n")
    return out


# ---------------------------------------------------------------------------------------------- run


@dataclass(frozen=True)
class RunResult(proc.FromProcess):
    """Outcome of one runner invocation.

    ``outputs``: output name → float32/int32 array (MNN's actual shape), empty unless ``ok``.
    ``op_ms`` / ``total_ms``: per timed run, milliseconds (empty in verify mode).
    ``op_types``: op type → number of ops of that type executed per run (timing mode only).
    ``error``: the runner's stdout+stderr when it failed (MNN's messages go to stdout, the runner's to stderr).  ``proc``: the raw process result (exit code, signal, logs).
    """

    ok: bool
    outputs: dict[str, np.ndarray]
    op_ms: list[float]
    total_ms: list[float]
    op_types: dict[str, int]
    error: str
    proc: proc.ProcResult
    timing_path: Path | None = field(default=None)


def runner_env(lib_dir: Path | None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for the runner: ``base`` (default :func:`kit.proc.base_env`) plus, when ``lib_dir`` is
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


def _reset_dir(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)


def _read_timing(path: Path, iterations: int) -> tuple[list[float], list[float], dict[str, int]]:
    try:
        data = json.loads(path.read_text())
        op_ms = [float(x) for x in data["op_ms"]]
        total_ms = [float(x) for x in data["total_ms"]]
        op_types = {str(k): int(v) for k, v in data["op_types"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise RunnerProtocolError(f"{path}: missing or malformed timing file ({e})") from e
    if len(op_ms) != iterations or len(total_ms) != iterations:
        raise RunnerProtocolError(f"{path}: {len(op_ms)}/{len(total_ms)} samples, expected {iterations}")
    return op_ms, total_ms, op_types


@dataclass(frozen=True)
class RunSettings:
    """How the runner is invoked besides the model, its inputs and the libraries: what native and candidate
    runs must share.

    ``threads``: MNN CPU threads; ``precision``: MNN BackendConfig precision (``high`` is fp32 on CPU);
    ``warmup`` untimed then ``iterations`` timed forward passes (``iterations = 0``: one run, outputs only);
    ``op_types``: MNN op type names whose times make ``op_ms`` (``"*"`` = every op); ``timeout_s``: seconds
    (each half for :func:`start_model`); ``memory_limit_bytes``: RLIMIT_AS of the runner process (None: none);
    ``cpus``: the CPU cores the runner is pinned to (empty: not pinned); ``policy``: how it is confined (the
    runner executes candidate code: :mod:`kit.sandbox`; it sees the runner, the libraries, the model and its
    input directory read-only and writes only its output directory).
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


def run_model(
    runner: Path,
    model: Path,
    inputs: Mapping[str, np.ndarray],
    output_names: Sequence[str],
    lib_dir: Path | None = None,
    settings: RunSettings = RunSettings(),
    *,
    scratch: Path,
    env: Mapping[str, str] | None = None,
) -> RunResult:
    """Run ``model`` once (``settings.iterations = 0``) or ``warmup`` + ``iterations`` times with ``runner``.

    Args:
        inputs: graph input name → array, in the model's input order; int64/bool/other integer arrays are sent
            as int32, float32 as is (other float dtypes are refused).
        output_names: the graph outputs to fetch, in order.
        lib_dir: a directory holding another ``libMNN.so`` (and optionally ``express/``) to run against;
            None = the libraries the runner was linked with.
        settings: threads, precision, warm-up and timed iterations, op types, timeout, memory limit.
        scratch: a directory of this call's own; ``scratch/in`` and ``scratch/out`` are recreated.
        env: base environment (default :func:`kit.proc.base_env`); ``LD_LIBRARY_PATH`` is set from ``lib_dir``.
    Returns:
        a :class:`RunResult`; ``ok`` False for a runner error (exit 3), a signal or a timeout.
    Raises:
        ValueError: bad arguments (precision, counts, names, dtypes).
        FileNotFoundError: the runner, the model or ``lib_dir/libMNN.so`` is missing.
        RunnerProtocolError: the runner rejected its command line or wrote incomplete results.
    """
    call = _Call.prepare(runner, model, inputs, output_names, lib_dir, settings, scratch=scratch, env=env)
    result = proc.run(call.argv, cwd=call.scratch, env=call.env, timeout_s=settings.timeout_s,
                      memory_limit_bytes=settings.memory_limit_bytes, cpus=settings.cpus, confine=call.confine)
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


def start_model(
    runner: Path,
    model: Path,
    inputs: Mapping[str, np.ndarray],
    output_names: Sequence[str],
    lib_dir: Path | None = None,
    settings: RunSettings = RunSettings(),
    *,
    scratch: Path,
    env: Mapping[str, str] | None = None,
) -> StartedRun | RunResult:
    """:func:`run_model` in two halves: start the runner with ``--wait-go 1`` and return once it has loaded the
    model and read the inputs (a :class:`StartedRun`; its :meth:`StartedRun.go` runs the rest), or the
    :class:`RunResult` of a runner that failed before (``ok`` False).  ``settings.timeout_s`` applies to each
    half.

    Raises:
        what :func:`run_model` raises.
    """
    call = _Call.prepare(runner, model, inputs, output_names, lib_dir, settings, scratch=scratch, env=env)
    started = proc.start([*call.argv, "--wait-go", "1"], ready_line=READY_LINE, cwd=call.scratch, env=call.env,
                         timeout_s=settings.timeout_s, memory_limit_bytes=settings.memory_limit_bytes,
                         cpus=settings.cpus, confine=call.confine)
    if isinstance(started, proc.ProcResult):
        return call.finish(started)
    return StartedRun(call, started, settings.timeout_s)


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

    def invocation_sha256(self, timeout_s: float | None = None) -> str:
        """sha256 (hex) of this invocation without what may differ between the sides of a comparison: the
        model and the input/output directories (positional arguments) and ``LD_LIBRARY_PATH`` (the libraries)
        are left out, and so are the values of :data:`_HOST_ENV` (where the caller's shell has them: they differ
        between sessions, never between the sides); the runner, every flag, the rest of the environment and the
        process settings (timeout, memory limit, cores, confinement) are in.  Native and candidate runs of one
        timing must have the same digest."""
        canonical = {
            "runner": self.argv[0],
            "flags": self.argv[4:],
            "env": {k: ("" if k in _HOST_ENV else v) for k, v in sorted(self.env.items()) if k != "LD_LIBRARY_PATH"},
            "timeout_s": self.settings.timeout_s if timeout_s is None else timeout_s,
            "memory_limit_bytes": self.settings.memory_limit_bytes,
            "cpus": list(self.settings.cpus),
            "policy": repr(self.settings.policy),
        }
        return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()

    @classmethod
    def prepare(
        cls, runner: Path, model: Path, inputs: Mapping[str, np.ndarray], output_names: Sequence[str],
        lib_dir: Path | None, settings: RunSettings, *, scratch: Path, env: Mapping[str, str] | None,
    ) -> _Call:
        """Check the arguments, recreate ``scratch/in`` (with the inputs) and ``scratch/out``."""
        runner, model, scratch = Path(runner), Path(model), Path(scratch)
        threads, precision, op_types = settings.threads, settings.precision, settings.op_types
        warmup, iterations = settings.warmup, settings.iterations
        if precision not in PRECISIONS:
            raise ValueError(f"precision {precision!r} not in {PRECISIONS}")
        if threads < 1 or warmup < 0 or iterations < 0:
            raise ValueError(f"threads={threads}, warmup={warmup}, iterations={iterations}: out of range")
        if not output_names or not op_types:
            raise ValueError("output_names and op_types must not be empty")
        for name in output_names:
            tensorio.check_name(name)
        for t in op_types:
            if not re.fullmatch(r"\*|[A-Za-z0-9_]+", t):
                raise ValueError(f"op type {t!r} is not an MNN op type name")
        for path, what in ((runner, "runner"), (model, "model")):
            if not path.is_file():
                raise FileNotFoundError(f"{what} {path} not found")
        in_dir, out_dir = scratch / "in", scratch / "out"
        _reset_dir(in_dir)
        _reset_dir(out_dir)
        tensorio.write_tensors(in_dir, {name: tensorio.to_wire(name, a) for name, a in inputs.items()})
        argv = [
            str(runner.resolve()), str(model.resolve()), str(in_dir.resolve()), str(out_dir.resolve()),
            "--outputs", ",".join(output_names), "--threads", str(threads), "--precision", precision,
            "--warmup", str(warmup), "--iterations", str(iterations), "--op-types", ",".join(op_types),
        ]  # fmt: skip
        confine = settings.policy.confine(ro=[runner, model, in_dir, *sandbox.lib_dirs(lib_dir)], rw=[out_dir])
        return cls(argv, runner_env(lib_dir, env), scratch, out_dir, tuple(output_names), iterations, settings,
                   confine)

    def finish(self, result: proc.ProcResult) -> RunResult:
        """The :class:`RunResult` of the finished runner (outputs and timing files read)."""
        if result.returncode == EXIT_USAGE and not result.timed_out:
            raise RunnerProtocolError(f"runner rejected its arguments: {result.stderr.strip()}")
        if not result.ok:
            # MNN prints its own diagnostics ("Compute Shape Error for y") on stdout, the runner's on stderr
            return RunResult(False, {}, [], [], {}, result.output.strip(), result)
        try:
            outputs = tensorio.read_tensors(self.out_dir)
        except tensorio.TensorIOError as e:
            raise RunnerProtocolError(f"runner exited 0 but its outputs are unreadable: {e}") from e
        if list(outputs) != list(self.output_names):
            raise RunnerProtocolError(f"runner wrote outputs {list(outputs)}, expected {list(self.output_names)}")
        op_ms: list[float] = []
        total_ms: list[float] = []
        counts: dict[str, int] = {}
        timing_path = None
        if self.iterations > 0:
            timing_path = self.out_dir / "timing.json"
            op_ms, total_ms, counts = _read_timing(timing_path, self.iterations)
        return RunResult(True, outputs, op_ms, total_ms, counts, "", result, timing_path)
