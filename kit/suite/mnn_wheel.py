"""Native MNN from the PyPI ``mnn`` wheel (3.6.1), for the audit: convert and run one task.

The converter can crash (segfault on some LSTM graphs), so both steps run in one child process
(this file run as a script, through :mod:`kit.host.proc`); the child prints one JSON line per stage
(``{"stage": "convert", ...}``, ``{"stage": "run", ...}``) and the parent reads them, so a crash is
attributed to the stage that did not report.  The wheel's ``mnnconvert`` console script and
``MNN.tools`` are never used (they run pip and send telemetry); the converter entry point
``_tools.mnnconvert`` is called directly.  The child imports nothing from ``kit``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

CONVERT_TIMEOUT_S = 120.0
RUN_TIMEOUT_S = 120.0


def _env() -> dict[str, str]:
    """Base environment plus PYTHONPATH pointing at this checkout of ``kit`` (installed or not)."""
    from kit.host import proc

    return proc.base_env({"PYTHONPATH": str(Path(__file__).resolve().parents[2]), "OMP_NUM_THREADS": "1"})


def _lines_json(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{\"stage\"") and line.endswith("}"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


def native(onnx_path: Path, workdir: Path, inputs: dict, input_names: list[str], output_names: list[str],
           loops: int = 5, timeout_s: float = CONVERT_TIMEOUT_S + RUN_TIMEOUT_S) -> dict:
    """Convert ``onnx_path`` with the wheel's converter and run it on ``inputs``, in one subprocess.

    A path ending in ``.mnn`` is taken as already converted (only run).

    Returns a dict: ``convert_ok`` (bool), ``op_types`` (converted graph, without Input), ``run_ok``,
    ``median_ms`` (median wall ms of ``loops`` runs after a warm-up; one thread, precision high),
    ``runtime_op_types`` (op types the session executed), ``outputs`` (name -> numpy array, int/bool
    results as int32), ``error`` (first failure: converter message, signal or timeout).
    """
    import numpy as np

    from kit.host import proc

    onnx_path, workdir = Path(onnx_path).resolve(), Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    in_npz, out_npz, mnn_path = workdir / "inputs.npz", workdir / "outputs.npz", workdir / "model.mnn"
    np.savez(in_npz, **inputs)
    res = proc.run([sys.executable, str(Path(__file__).resolve()), "native", str(onnx_path), str(mnn_path),
                    str(in_npz), str(out_npz), ",".join(input_names), ",".join(output_names), str(loops)],
                   env=_env(), timeout_s=timeout_s, cwd=workdir)
    stages = {d["stage"]: d for d in _lines_json(res.stdout)}
    conv = stages.get("convert")
    run = stages.get("run")
    out: dict = {"convert_ok": bool(conv and conv.get("ok")), "op_types": (conv or {}).get("op_types", []),
                 "run_ok": bool(run and run.get("ok")), "median_ms": (run or {}).get("median_ms"),
                 "runtime_op_types": (run or {}).get("runtime_op_types", []), "outputs": {}, "error": ""}
    where = "runtime" if out["convert_ok"] else "converter"
    if res.signal is not None:
        out["error"] = f"{where} crashed (signal {res.signal})"
    elif res.timed_out:
        out["error"] = f"{where} timed out after {timeout_s:g} s"
    elif conv is not None and not conv.get("ok"):
        out["error"] = conv.get("error") or "conversion failed"
    elif run is not None and not run.get("ok"):
        out["error"] = run.get("error") or "run failed"
    elif run is None:
        tail = res.output.strip().splitlines()[-3:]
        out["error"] = f"{where} failed: " + " | ".join(tail)
    if out["run_ok"] and out_npz.is_file():
        with np.load(out_npz) as z:
            out["outputs"] = {k: z[k] for k in z.files}
    return out


# ----------------------------------------------------------------------------------------- child side
def _child_convert(onnx_path: str, mnn_path: str) -> dict:
    import _tools  # the wheel's converter extension module

    Path(mnn_path).unlink(missing_ok=True)
    ok = _tools.mnnconvert(["mnnconvert", "-f", "ONNX", "--modelFile", onnx_path, "--MNNModel", mnn_path,
                            "--bizCode", "MNN", "--keepInputFormat=1"])
    sys.stdout.flush()
    if not ok or not Path(mnn_path).is_file():
        return {"ok": False, "error": "converter reported failure (no model written)", "op_types": []}
    import MNN.expr as F

    vs = F.load_as_list(mnn_path)
    op_types = [v.op_type for v in vs if v.op_type != "Input"]
    return {"ok": True, "error": "", "op_types": op_types}


def _child_run(mnn_path: str, in_npz: str, out_npz: str, in_names: str, out_names: str, loops: str) -> dict:
    import MNN.expr as F
    import numpy as np
    from MNN import nn

    inputs = dict(np.load(in_npz))
    names_in = in_names.split(",")
    names_out = out_names.split(",")
    rt = nn.create_runtime_manager(({"backend": "CPU", "numThread": 1, "precision": "high"},))
    module = nn.load_module_from_file(mnn_path, names_in, names_out, runtime_manager=rt)
    info = module.get_info()
    if not info.get("inputNames") and names_in:
        return {"ok": False, "error": "converted model has no inputs"}

    def feeds():
        vs = []
        for n in names_in:
            a = inputs[n]
            if a.dtype.kind in "biu":
                a = a.astype(np.int32)
                vs.append(F.const(a, list(a.shape), F.NCHW, F.int))
            else:
                a = a.astype(np.float32)
                vs.append(F.const(a, list(a.shape), F.NCHW, F.float))
        return vs

    outs = module.onForward(feeds())
    arrays = {n: np.array(o.read()) for n, o in zip(names_out, outs)}
    times = []
    for _ in range(int(loops)):
        vs = feeds()
        t0 = time.perf_counter()
        res = module.onForward(vs)
        for o in res:
            o.read()
        times.append((time.perf_counter() - t0) * 1e3)
    np.savez(out_npz, **arrays)
    try:
        runtime_types = _runtime_op_types(mnn_path, inputs)
    except Exception as exc:  # noqa: BLE001 - the session API is only used to name the executed op types
        runtime_types = [f"?{type(exc).__name__}"]
    return {"ok": True, "error": "", "median_ms": float(np.median(times)) if times else None,
            "runtime_op_types": runtime_types}


def _runtime_op_types(mnn_path: str, inputs: dict) -> list[str]:
    """Op types executed by the session API (geometry already applied), in order, each listed once."""
    import MNN
    import numpy as np

    it = MNN.Interpreter(mnn_path)
    session = it.createSession({"numThread": 1, "precision": "high"})
    for name, arr in inputs.items():
        t = it.getSessionInput(session, name)
        it.resizeTensor(t, tuple(arr.shape))
    it.resizeSession(session)
    for name, arr in inputs.items():
        t = it.getSessionInput(session, name)
        if arr.dtype.kind in "biu":
            tmp = MNN.Tensor(tuple(arr.shape), MNN.Halide_Type_Int, arr.astype(np.int32),
                             MNN.Tensor_DimensionType_Caffe)
        else:
            tmp = MNN.Tensor(tuple(arr.shape), MNN.Halide_Type_Float, arr.astype(np.float32),
                             MNN.Tensor_DimensionType_Caffe)
        t.copyFrom(tmp)
    seen: list[str] = []

    def begin(tensors, op):
        return True

    def end(tensors, op):
        if op.getType() not in seen:
            seen.append(op.getType())
        return True

    it.runSessionWithCallBackInfo(session, begin, end)
    return seen


# ----------------------------------------------------------------------------------------- batch mode
def start_batch(task_dirs: list[Path], seed: int, out_dir: Path, loops: int = 5):
    """Run :func:`native` for every task folder in ONE helper process, in the background.

    The audit calls this before doing any numpy/BLAS work: forking while another thread of the same
    process is inside OpenBLAS can deadlock (OpenBLAS's pre-fork handler), so all per-task forks happen
    in the helper.  Results appear as ``out_dir/<task_id>.json`` (+ ``.npz`` outputs), written atomically;
    read them with :func:`batch_result`.  Returns the thread running the helper (join it at the end).
    """
    import threading

    from kit.host import proc

    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = out_dir / "jobs.json"
    jobs.write_text(json.dumps({"tasks": [str(Path(d).resolve()) for d in task_dirs], "seed": seed,
                                "loops": loops}), encoding="utf-8")
    started = threading.Event()

    def _run() -> None:
        started.set()
        timeout = (CONVERT_TIMEOUT_S + RUN_TIMEOUT_S + 30) * max(1, len(task_dirs))
        res = proc.run([sys.executable, str(Path(__file__).resolve()), "batch", str(jobs)], env=_env(),
                       timeout_s=timeout, cwd=out_dir)
        (out_dir / "batch.done").write_text(json.dumps({"returncode": res.returncode, "tail": res.output[-2000:]}))

    thread = threading.Thread(target=_run, name="mkb-native-batch", daemon=True)
    thread.start()
    started.wait()
    # wait until the helper process exists (its first act is to write batch.started)
    deadline = time.monotonic() + 60
    while not (out_dir / "batch.started").exists() and not (out_dir / "batch.done").exists():
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return thread


def batch_result(out_dir: Path, task_id: str, poll_s: float = 0.1) -> dict:
    """Wait for and return one task's :func:`native` result from a batch (outputs loaded from .npz)."""
    import numpy as np

    out_dir = Path(out_dir).resolve()
    res_file = out_dir / f"{task_id}.json"
    while not res_file.exists():
        if (out_dir / "batch.done").exists() and not res_file.exists():
            done = json.loads((out_dir / "batch.done").read_text())
            return {"convert_ok": False, "op_types": [], "run_ok": False, "median_ms": None,
                    "runtime_op_types": [], "outputs": {},
                    "error": f"native batch helper ended (rc {done['returncode']}) before this task"}
        time.sleep(poll_s)
    out = json.loads(res_file.read_text())
    npz = out_dir / f"{task_id}.npz"
    out["outputs"] = {}
    if npz.exists():
        with np.load(npz) as z:
            out["outputs"] = {k: z[k] for k in z.files}
        npz.unlink()
    res_file.unlink()
    return out


def _batch_main(jobs_path: str) -> int:
    import numpy as np

    from kit.suite.inputs import make_inputs
    from kit.suite.tasks import load_task

    jobs = json.loads(Path(jobs_path).read_text())
    out_dir = Path(jobs_path).parent
    (out_dir / "batch.started").write_text("")
    for folder in jobs["tasks"]:
        task = load_task(Path(folder))
        work = out_dir / "work" / task.id
        try:
            res = native(task.onnx_path, work, make_inputs(task, int(jobs["seed"])), [s.name for s in task.inputs],
                         [s.name for s in task.outputs], loops=int(jobs["loops"]))
        except Exception as exc:  # noqa: BLE001 - keep going: one task's failure is that task's fact
            res = {"convert_ok": False, "op_types": [], "run_ok": False, "median_ms": None,
                   "runtime_op_types": [], "outputs": {}, "error": f"{type(exc).__name__}: {exc}"}
        outputs = res.pop("outputs")
        if outputs:
            np.savez(out_dir / f"{task.id}.tmp.npz", **outputs)
            (out_dir / f"{task.id}.tmp.npz").rename(out_dir / f"{task.id}.npz")
        (out_dir / f"{task.id}.tmp.json").write_text(json.dumps(res))
        (out_dir / f"{task.id}.tmp.json").rename(out_dir / f"{task.id}.json")
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return 0


def _main(argv: list[str]) -> int:
    cmd, args = argv[0], argv[1:]
    if cmd == "batch":
        return _batch_main(*args)
    if cmd != "native":
        raise SystemExit(f"unknown command {cmd!r}")
    onnx_path, mnn_path, in_npz, out_npz, in_names, out_names, loops = args
    if onnx_path.endswith(".mnn"):  # already converted (e.g. by MNN 3.2.2's MNNConvert): just describe it
        import MNN.expr as F

        mnn_path = onnx_path
        conv = {"ok": True, "error": "", "op_types": [v.op_type for v in F.load_as_list(mnn_path)
                                                      if v.op_type != "Input"]}
    else:
        conv = _child_convert(onnx_path, mnn_path)
    print(json.dumps({"stage": "convert", **conv}), flush=True)
    if not conv["ok"]:
        return 0
    try:
        run = _child_run(mnn_path, in_npz, out_npz, in_names, out_names, loops)
    except Exception as exc:  # noqa: BLE001 - any failure is recorded as this task's problem
        run = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps({"stage": "run", **run}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
