"""Find each task's MNN op types empirically and write ``kit/suite/observed.toml``.

``python -m kit.suite.probe TASKS_DIR --converter PATH/TO/MNNConvert [--out kit/suite/observed.toml]``
converts every ``model.onnx`` with the given converter (MNN 3.2.2's ``MNNConvert``; without
``--converter`` the PyPI wheel's converter is used) and runs the result with a per-op callback (PyPI
wheel runtime) to list the converted graph's op types and the executed runtime op types.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kit.host import proc
from kit.suite import mnn_wheel
from kit.suite.inputs import make_inputs
from kit.suite.mnn_targets import OBSERVED_TOML
from kit.suite.tasks import Task, load_suite
from kit.suite.tomlw import dumps_observed


def convert_with(converter: Path, onnx_path: Path, mnn_path: Path) -> str:
    """Convert with an MNNConvert binary; returns "" on success or the reason of the failure."""
    res = proc.run([str(converter), "-f", "ONNX", "--modelFile", str(onnx_path), "--MNNModel", str(mnn_path),
                    "--bizCode", "MNN", "--keepInputFormat=1"], timeout_s=120)
    if res.signal is not None:
        return f"converter crashed (signal {res.signal})"
    if "Converted Success" not in res.output or not mnn_path.is_file():
        lines = [ln for ln in res.output.splitlines() if "Not Support" in ln or "rror" in ln]
        return "conversion failed: " + " | ".join(lines[-3:])
    return ""


def probe_task(task: Task, converter: Path | None, root: Path) -> dict:
    work = root / task.id
    work.mkdir(parents=True, exist_ok=True)
    try:
        inputs = make_inputs(task, 0)
        model = task.onnx_path
        if converter is not None:
            model = work / "converted.mnn"
            err = convert_with(converter, task.onnx_path, model)
            if err:
                return {"error": err}
        nat = mnn_wheel.native(model, work / "run", inputs, [s.name for s in task.inputs],
                               [s.name for s in task.outputs], loops=0)
        info = {"graph": nat["op_types"], "runtime": nat["runtime_op_types"], "error": nat["error"]}
        return {k: v for k, v in info.items() if v}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("tasks_dir", type=Path)
    ap.add_argument("--converter", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=OBSERVED_TOML)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args(argv)
    tasks = load_suite(a.tasks_dir)
    with tempfile.TemporaryDirectory(prefix="mkb-probe-") as tmp, ThreadPoolExecutor(a.workers) as pool:
        results = dict(zip([t.id for t in tasks], pool.map(lambda t: probe_task(t, a.converter, Path(tmp)), tasks)))
    source = "3.2.2 MNNConvert" if a.converter else "PyPI mnn wheel converter"
    text = dumps_observed(results, converter=f"{source}, --keepInputFormat=1",
                          runtime="PyPI mnn wheel session, per-op callback")
    a.out.write_text(text, encoding="utf-8")
    print(json.dumps({k: v.get("error", "") for k, v in results.items() if v.get("error")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
