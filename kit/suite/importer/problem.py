"""Parent side of exporting one problem file: run :mod:`kit.suite.importer.export` in its own process through
:mod:`kit.host.proc` with a memory limit (RLIMIT_AS) and a timeout, and read its one-line JSON report."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from kit.host import proc

#: default export limits: address space of the child (bytes; torch's CPU build maps ~2 GiB at import), seconds
EXPORT_MEMORY_BYTES = 8 << 30
EXPORT_TIMEOUT_S = 300.0
#: default budget: bytes of inputs + parameters + outputs of one task (larger problems are scaled down)
BUDGET_BYTES = 64 << 20


class ImportFailure(Exception):
    """One source cannot become a task; ``kind`` groups the reasons (``bad_file``, ``missing_package``,
    ``unsupported_input``, ``unsupported_output``, ``over_budget``, ``export_failed``, ``irreducible``,
    ``bad_model``, ``crashed``)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Exported:
    """What the child wrote into ``work``: ``raw.onnx``, ``model.py`` (the file, scaled constants rewritten),
    ``inputs.npz``/``outputs.npz`` (sample inputs, torch's outputs), ``params.npz`` (state dict)."""

    work: Path
    inputs: list[dict]
    outputs: list[dict]
    #: constant name -> [value in the file, value used]
    scaled: dict[str, list[int]] = field(default_factory=dict)
    #: bytes of inputs + parameters + outputs after scaling (-1: not measured)
    measured_bytes: int = -1
    torch_version: str = ""
    #: which torch exporter wrote raw.onnx
    exporter: str = ""


def export_problem(problem: Path, work: Path, *, opset: int = 20, budget_bytes: int = BUDGET_BYTES,
                   memory_limit_bytes: int = EXPORT_MEMORY_BYTES, timeout_s: float = EXPORT_TIMEOUT_S,
                   seed: int = 0) -> Exported:
    """Export ``problem`` (a KernelBench-format file) into the empty folder ``work``.

    Raises:
        ImportFailure: the child's reported failure, or ``crashed`` (killed by a signal, over the memory limit,
            timed out, no report).
    """
    work.mkdir(parents=True, exist_ok=True)
    work = work.resolve()  # the child runs in ``work``: a relative path (``--out paper-tasks``) would miss
    job = work / "job.json"
    job.write_text(json.dumps({"problem": str(Path(problem).resolve()), "out_dir": str(work),
                               "opset": opset, "budget_bytes": budget_bytes, "seed": seed}), encoding="utf-8")
    env = proc.base_env({"OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    res = proc.run([sys.executable, str(Path(__file__).with_name("export.py")), str(job)], cwd=work, env=env,
                   timeout_s=timeout_s, memory_limit_bytes=memory_limit_bytes)
    report = None
    for line in res.stdout.splitlines():
        if line.startswith('{"mkb_export"'):
            report = json.loads(line)["mkb_export"]
    if report is None:
        how = (f"timed out after {timeout_s:g} s" if res.timed_out else f"killed by signal {res.signal}"
               if res.signal else f"exited {res.returncode} without a report")
        tail = " | ".join(res.output.strip().splitlines()[-2:])[:300]
        raise ImportFailure("crashed", f"export process {how} (memory limit {memory_limit_bytes} bytes): {tail}")
    if not report["ok"]:
        raise ImportFailure(report["kind"], report["error"])
    return Exported(work, report["inputs"], report["outputs"], report.get("scaled") or {},
                    report.get("measured_bytes", -1), report.get("torch", ""), report.get("exporter", ""))
