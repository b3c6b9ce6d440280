"""Convert an ONNX model with MNNConvert and tell from its output whether it worked.

MNNConvert exits 0 even when it fails ("These Op Not Support: ONNX::X", "Converted Failed!"), so success is
read from its log ("Converted Success!") and the output file, never from the exit code alone.  Nothing here
turns a failure into a record status: :class:`ConvertResult` carries ``ok``, the reason and the process result.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kit.host import proc, sandbox

_CONVERT_SUCCESS = "Converted Success!"
_NOT_SUPPORTED = re.compile(r"These Op Not Support:\s*(.*)")


@dataclass(frozen=True)
class ConvertResult(proc.FromProcess):
    """Outcome of one MNNConvert run.

    ``ok`` only when the log says "Converted Success!" and ``model_path`` exists and is non-empty (MNNConvert
    exits 0 on failure).  ``unsupported_ops`` lists what "These Op Not Support:" named (e.g. ``ONNX::BitwiseXor``).
    ``log`` is stdout+stderr.  ``reason`` says why it failed ("" when ok).
    """

    ok: bool
    model_path: Path
    unsupported_ops: tuple[str, ...]
    log: str
    reason: str
    proc: proc.ProcResult


def parse_unsupported(log: str) -> tuple[str, ...]:
    """The op names of every "These Op Not Support: A | B" line of an MNNConvert log, in order, no repeats."""
    names: list[str] = []
    for match in _NOT_SUPPORTED.finditer(log):
        for name in match.group(1).split("|"):
            name = name.strip()
            if name and name not in names:
                names.append(name)
    return tuple(names)


@dataclass(frozen=True)
class ConvertOptions:
    """How one MNNConvert run goes besides its files: ``timeout_s``, seconds for the process; ``extra_args``,
    further command-line arguments; ``memory_limit_bytes``, its RLIMIT_AS (None: none); ``policy``, how it is
    confined (a candidate's converter is candidate code: :mod:`kit.host.sandbox`)."""

    timeout_s: float = 300.0
    extra_args: tuple[str, ...] = ()
    memory_limit_bytes: int | None = None
    policy: sandbox.Policy = sandbox.Policy()


def convert(
    mnnconvert: Path,
    onnx_path: Path,
    out_mnn: Path,
    opts: ConvertOptions = ConvertOptions(),
    *,
    env: Mapping[str, str] | None = None,
    lib_dir: Path | None = None,
) -> ConvertResult:
    """Convert ``onnx_path`` to ``out_mnn`` with ``MNNConvert -f ONNX ... --bizCode MNN --keepInputFormat=1``
    (``opts``: timeout, extra arguments, memory limit, confinement: :class:`ConvertOptions`).

    ``out_mnn`` is deleted first so a stale file never counts; the converter runs in ``out_mnn``'s directory.
    ``env`` defaults to :func:`kit.host.proc.base_env` (pass ``LD_LIBRARY_PATH`` here to run it against other libs).
    ``opts.policy`` confines it: it sees the converter, the ONNX model and ``lib_dir`` (the libraries
    ``LD_LIBRARY_PATH`` names) read-only and writes only ``out_mnn``'s directory.

    Returns:
        a :class:`ConvertResult` (``ok`` False when the converter failed, however: never raised).
    Raises:
        FileNotFoundError: ``mnnconvert`` or ``onnx_path`` does not exist.
    """
    mnnconvert, onnx_path, out_mnn = Path(mnnconvert), Path(onnx_path), Path(out_mnn)
    if not onnx_path.is_file():
        raise FileNotFoundError(f"ONNX model {onnx_path} not found")
    if not mnnconvert.is_file():
        raise FileNotFoundError(f"converter {mnnconvert} not found")
    out_mnn.parent.mkdir(parents=True, exist_ok=True)
    out_mnn.unlink(missing_ok=True)
    argv = [
        str(mnnconvert), "-f", "ONNX", "--modelFile", str(onnx_path.resolve()), "--MNNModel", str(out_mnn.resolve()),
        "--bizCode", "MNN", "--keepInputFormat=1", *opts.extra_args,
    ]  # fmt: skip
    result = proc.run(
        argv, cwd=out_mnn.parent, env=env if env is not None else proc.base_env(), timeout_s=opts.timeout_s,
        memory_limit_bytes=opts.memory_limit_bytes,
        confine=opts.policy.confine(ro=[mnnconvert, onnx_path, *sandbox.lib_dirs(lib_dir)], rw=[out_mnn.parent],
                               step=f"MNNConvert {mnnconvert}"),
    )
    log = result.output
    unsupported = parse_unsupported(log)
    exists = out_mnn.is_file() and out_mnn.stat().st_size > 0
    if result.timed_out:
        reason = f"MNNConvert timed out after {opts.timeout_s:g} s"
    elif result.signal is not None:
        reason = f"MNNConvert killed by signal {result.signal}"
    elif unsupported:
        reason = "ops not supported by the converter: " + ", ".join(unsupported)
    elif _CONVERT_SUCCESS not in log:
        reason = f"MNNConvert did not report success (exit {result.returncode})"
    elif not exists:
        reason = f"MNNConvert reported success but {out_mnn} is missing or empty"
    elif result.returncode != 0:
        reason = f"MNNConvert exited {result.returncode}"
    else:
        reason = ""
    return ConvertResult(not reason, out_mnn, unsupported, log, reason, result)
