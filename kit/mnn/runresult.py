"""What one runner invocation leaves (:mod:`kit.mnn.runner` states the protocol): its exit statuses (``EXIT_*``),
the result types (:class:`RunResult`, :class:`CheckedForward`), the protocol errors, and the reading of the runner's output
directory (its outputs, ``timing.json``, the checked forwards), refusing what the runner never writes (links,
special files, oversized files: :class:`PlantedOutputError`).

Nothing here turns a failure into a record status; a malformed or missing output is a
:class:`RunnerProtocolError` (a fault of the kit, or of the candidate's code that runs in the runner).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kit.host import fstree, proc
from kit.mnn import tensorio

#: exit status of the runner for a load/shape/run error (2 = usage error)
EXIT_RUN_ERROR = 3
EXIT_USAGE = 2
#: exit status of the runner when a forward changed an input tensor's bytes
EXIT_INPUT_MODIFIED = 4
#: exit status of the runner when more threads than the engine's own remain after a forward
EXIT_THREADS_LEFT = 5
#: exit status of the runner when a timed forward left a float32 output (partly) unwritten, its poison still there
EXIT_TIMED_OUTPUT_CHANGED = 6
#: exit status of the runner when a process besides it exists after a forward (the candidate started one)
EXIT_PROCESS_LEFT = 7
#: exit status of the runner when a stamp could not be written whole to stderr, or stderr is no longer the file
#: it was at the start (the candidate closed it or put a pipe of its own there)
EXIT_STAMP_LOST = 8
#: exit status of the runner when candidate code made a system call its seccomp filter refuses (the line on
#: stderr names the call)
EXIT_FORBIDDEN_CALL = 9
#: exit status of the runner when candidate code asked for a mapping larger than the address space its memory
#: limit (RLIMIT_AS, ``verify.memory_limit_mb``) leaves; the line on stderr names the limit in MiB
EXIT_MEMORY_LIMIT = 10
#: the file of a timing run's times (:func:`read_timing`), written last
TIMING_FILE = "timing.json"
#: the largest timing.json read: ~12 bytes per time, two times per timed forward (10**6 forwards at most)
MAX_TIMING_BYTES = 32 << 20


class RunnerProtocolError(RuntimeError):
    """The runner broke its protocol (usage error, missing or malformed output files): a fault of the kit, or of
    the candidate's code that runs in it (the stages say whose)."""


class PlantedOutputError(RunnerProtocolError):
    """The runner's output directory holds a symbolic link, a special file (a FIFO) or a file larger than it may
    be where the kit reads (:class:`kit.mnn.tensorio.PlantedFileError`): the runner writes none of those, the
    candidate's code running in it did."""


def _read_error(e: tensorio.TensorIOError, what: str) -> RunnerProtocolError:
    """The protocol error of an output the kit could not read (``what`` names it)."""
    cls = PlantedOutputError if isinstance(e, tensorio.PlantedFileError) else RunnerProtocolError
    return cls(f"{what}: {e}")


@dataclass(frozen=True)
class CheckedForward:
    """A timed forward on fresh inputs that the runner picked at random and wrote out: ``forward`` (1-based
    number among the run's timed forwards) and ``dir``, holding ``out/`` and either ``draw/`` (the kit's runner:
    the pool index of every unit of the inputs, which the kit rebuilds them from) or ``in/`` (the inputs
    themselves: the fixture engine's runner), tensor directories."""

    forward: int
    dir: Path
    #: the runner's output directory, below which no directory may be a link (None: ``dir``'s own only)
    root: Path | None = None
    #: ``draw/`` written (else ``in/``)
    drawn: bool = True

    def read(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """What the runner wrote of the forward's inputs (``draw/``'s int32 indices, or ``in/``'s tensors: see
        :attr:`drawn`) and its outputs (name → float32/int32 array, wire dtypes).

        Raises:
            RunnerProtocolError: a tensor directory is missing or malformed; PlantedOutputError: a link, a
                special file or an oversized file in the way."""
        try:
            return (tensorio.read_tensors(self.dir / ("draw" if self.drawn else "in"), root=self.root),
                    tensorio.read_tensors(self.dir / "out", root=self.root))
        except tensorio.TensorIOError as e:
            raise _read_error(e, f"checked forward {self.forward}") from e


@dataclass(frozen=True)
class RunResult(proc.FromProcess):
    """Outcome of one runner invocation.

    ``outputs``: output name → float32/int32 array (MNN's actual shape) of the first input set, empty unless
    ``ok``; ``output_sets``: those of every input set, in order (one for a single set); in timing mode those of
    each set's first timed forward, which every later timed forward on the set matched byte for byte.
    ``op_ms`` / ``total_ms``: per timed run, milliseconds (empty in verify mode).
    ``op_types``: op type → number of ops of that type executed per run (timing mode only).
    ``phase_ms``: the runner's own wall time from "go" to the end of its timed runs (timing mode only);
    ``written_ms``: the same clock at the end of writing its results (timing.json is written last).
    ``checked``: the timed forwards on fresh inputs it wrote out (timing mode with ``RunSettings.checked``).
    ``error``: the runner's stdout+stderr when it failed (MNN's messages go to stdout, the runner's to stderr).
    ``proc``: the raw process result (exit code, signal, logs; the stamp lines taken out: :mod:`kit.mnn.stamps`).
    ``stamp_error``: in timing mode, why the runner's stamp stream is missing, malformed or disagrees with
    ``timing.json`` (empty: it agrees, and ``op_ms``/``total_ms`` are the stream's); the timing stage makes it
    ``clock_mismatch``.
    ``cpu_go_s``: in timing mode, the CPU seconds the runner's processes had used when the kit let it go (read by
    the kit from /proc, :func:`kit.host.proc.session_cpu_s`; None: not read), so that ``proc.cpu_s - cpu_go_s`` is
    the CPU time of everything after the start-up (:mod:`kit.stages.accounting`); ``cpu_ns``: the runner's CPU
    main thread's time (ns, CLOCK_THREAD_CPUTIME_ID) at each timed forward's begin and end stamp, from the stream (empty: none).
    """

    ok: bool
    outputs: dict[str, np.ndarray]
    op_ms: list[float]
    total_ms: list[float]
    op_types: dict[str, int]
    error: str
    proc: proc.ProcResult
    timing_path: Path | None = field(default=None)
    output_sets: tuple[dict[str, np.ndarray], ...] = ()
    phase_ms: float | None = None
    checked: tuple[CheckedForward, ...] = ()
    written_ms: float | None = None
    stamp_error: str = ""
    cpu_go_s: float | None = None
    cpu_ns: list[tuple[int, int]] = field(default_factory=list)


@dataclass(frozen=True)
class Timing:
    """The contents of ``timing.json`` (the fields of :class:`RunResult` of the same names)."""

    op_ms: list[float]
    total_ms: list[float]
    op_types: dict[str, int]
    phase_ms: float
    checked: list[int]
    written_ms: float


def read_timing(path: Path, iterations: int, root: Path | None = None) -> Timing:
    """``timing.json`` at ``path`` (at most :data:`MAX_TIMING_BYTES`; no link below ``root``), with ``iterations``
    samples on each basis.

    Raises:
        RunnerProtocolError: missing, malformed or the wrong number of samples; PlantedOutputError: a link, a
            special file or an oversized file."""
    try:
        raw = tensorio.read_regular(path, MAX_TIMING_BYTES, root)
    except tensorio.TensorIOError as e:
        raise _read_error(e, "timing file") from e
    try:
        data = json.loads(raw)
        timing = Timing([float(x) for x in data["op_ms"]], [float(x) for x in data["total_ms"]],
                        {str(k): int(v) for k, v in data["op_types"].items()}, float(data["phase_ms"]),
                        [int(x) for x in data["checked"]], float(data["written_ms"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise RunnerProtocolError(f"{path}: missing or malformed timing file ({e})") from e
    if len(timing.op_ms) != iterations or len(timing.total_ms) != iterations:
        raise RunnerProtocolError(f"{path}: {len(timing.op_ms)}/{len(timing.total_ms)} samples, expected {iterations}")
    return timing


def read_outputs(out_dir: Path, root: Path, output_names: Sequence[str]) -> dict[str, np.ndarray]:
    """The outputs the runner wrote in ``out_dir`` (no link below ``root``, its output directory): exactly
    ``output_names``, in order.

    Raises:
        RunnerProtocolError: unreadable, or other outputs; PlantedOutputError: a link, a special file or an
            oversized file."""
    try:
        outputs = tensorio.read_tensors(out_dir, root=root)
    except tensorio.TensorIOError as e:
        raise _read_error(e, "runner exited 0 but its outputs are unreadable") from e
    if list(outputs) != list(output_names):
        raise RunnerProtocolError(f"runner wrote outputs {list(outputs)} in {out_dir}, expected "
                                  f"{list(output_names)}")
    return outputs


def read_checked(forwards: list[int], out_dir: Path, *, n_sets: int, checked: int,
                 iterations: int) -> tuple[CheckedForward, ...]:
    """The checked forwards the runner wrote out under ``out_dir/checked/`` (``forwards``: their numbers from
    ``timing.json``): as many as asked for (``checked``, at most the ``iterations - n_sets`` timed forwards on
    fresh inputs), each with its directory.

    Raises:
        RunnerProtocolError: other numbers, or a directory missing; PlantedOutputError: one is not a directory."""
    want = min(checked, iterations - n_sets)
    if len(forwards) != want or len(set(forwards)) != want or not all(n_sets < f <= iterations for f in forwards):
        raise RunnerProtocolError(f"runner wrote checked forwards {forwards}, expected {want} distinct ones "
                                  f"among timed forwards {n_sets + 1}..{iterations}")
    out = []
    for j, f in enumerate(forwards):
        where = out_dir / "checked" / str(j)
        drawn = os.path.lexists(where / "draw")
        for d in (where.parent, where, where / ("draw" if drawn else "in"), where / "out"):
            try:
                mode = d.lstat().st_mode
            except OSError:
                raise RunnerProtocolError(f"runner exited 0 but checked forward {f} has no {d}") from None
            if not stat.S_ISDIR(mode):  # a link is not followed: it is not the runner's
                raise PlantedOutputError(f"checked forward {f}: {d} is not a directory (a link?): refused")
        out.append(CheckedForward(f, where, out_dir, drawn))
    return tuple(out)


def check_caps(out_dir: Path) -> None:
    """Walk the runner's output directory within the kit's caps (:data:`kit.host.fstree.CAPS`) before reading it.

    Raises:
        PlantedOutputError: it holds more than a cap allows (entries, depth, bytes), or cannot be walked."""
    try:
        tally = fstree.scan(out_dir)
    except OSError as e:
        raise PlantedOutputError(f"its output directory cannot be walked: {e.strerror}") from None
    if tally.over:
        raise PlantedOutputError(f"its output directory holds {tally.over}")
