"""Audit of the task suite: is every task well formed, runnable and discriminating?

Per task (see :func:`audit_task`):

1. ``model.onnx`` passes ``onnx.checker`` (full check), imports opset ``task.opset`` and holds exactly
   one node, of ``task.op_type``; its graph inputs/outputs are the task's (initializers are not inputs).
2. ONNX Runtime runs it on ``kit.inputs.make_inputs(task, seed)``; outputs have the declared shapes and
   dtypes (wall ms of one warm run recorded).
3. Mutants fail: an all-zero output, a constant output (1 and the reference mean) and, where an input
   has the output's shape, the identity output must each FAIL ``kit.compare.compare`` against the
   reference with the task's tolerance.
4. PyTorch eager (``model.py``: ``Model(*get_init_inputs())``, parameters and persistent buffers loaded
   from the ONNX initializers of the same name) equals ONNX Runtime within the task tolerance, and
   ``get_inputs()`` yields the task's input shapes and dtypes.  (Skipped when ``torch_check`` is False.)
5. ``onnx.reference.ReferenceEvaluator`` is compared with ONNX Runtime: a disagreement is REPORTED in
   ``refeval_note``, never a failure.
6. Native MNN from the PyPI wheel converts and runs the model in a subprocess (``kit.suite.mnn_wheel``):
   pass/fail, errors, wall ms and the executed op types are recorded facts, never a failure of the
   audit (``mnn_op_types_seen``: every op type of task.toml's ``mnn_op_types`` was executed).

Only steps 1-4 decide ``passed``.  torch is imported lazily, only here.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

from kit.compare import compare
from kit.inputs import make_inputs
from kit.tasks import Task, load_suite

_NP = {"float32": np.float32, "int32": np.int32, "int64": np.int64, "bool": np.bool_}

#: columns of the audit frame / calibration.csv, in order
COLUMNS: dict[str, pl.DataType] = {
    "task_id": pl.Utf8,
    "category": pl.Utf8,
    "op_type": pl.Utf8,
    "mechanism": pl.Utf8,
    "split": pl.Utf8,
    "passed": pl.Boolean,
    "problems": pl.Utf8,
    "structure_ok": pl.Boolean,
    "ort_ok": pl.Boolean,
    "ort_ms": pl.Float64,
    "mutants_ok": pl.Boolean,
    "torch_ok": pl.Boolean,
    "torch_max_abs_err": pl.Float64,
    "torch_max_rel_err": pl.Float64,
    "refeval_agrees": pl.Boolean,
    "refeval_note": pl.Utf8,
    "native_convert_ok": pl.Boolean,
    "native_ok": pl.Boolean,
    "native_max_abs_err": pl.Float64,
    "native_max_rel_err": pl.Float64,
    "native_ms": pl.Float64,
    "native_op_types": pl.Utf8,
    "native_runtime_op_types": pl.Utf8,
    "native_error": pl.Utf8,
    "mnn_op_types_seen": pl.Boolean,
    "atol": pl.Float64,
    "rtol": pl.Float64,
}


class AuditError(Exception):
    """A check of the audit failed (the message says which check and why)."""


# ------------------------------------------------------------------------------------------ steps
def check_structure(task: Task):  # -> onnx.ModelProto
    """Step 1. Returns the loaded model; raises AuditError naming the file and the violated rule."""
    import onnx

    path = task.onnx_path
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:  # noqa: BLE001 - onnx raises several types
        raise AuditError(f"{path}: onnx.checker failed: {exc}") from None
    opsets = {o.domain: o.version for o in model.opset_import}
    if opsets.get("", opsets.get("ai.onnx")) != task.opset:
        raise AuditError(f"{path}: imports opset {opsets}, task.toml says opset {task.opset}")
    nodes = list(model.graph.node)
    if len(nodes) != 1:
        raise AuditError(f"{path}: graph has {len(nodes)} nodes ({[n.op_type for n in nodes]}), expected exactly 1")
    if nodes[0].op_type != task.op_type:
        raise AuditError(f"{path}: node is {nodes[0].op_type!r}, task.toml op_type is {task.op_type!r}")
    inits = {i.name for i in model.graph.initializer}
    g_in = [i.name for i in model.graph.input if i.name not in inits]
    if g_in != [t.name for t in task.inputs]:
        raise AuditError(f"{path}: graph inputs {g_in} != task inputs {[t.name for t in task.inputs]}")
    if any(i.name in inits for i in model.graph.input):
        raise AuditError(f"{path}: an initializer is also a graph input (attribute tensors must be constants)")
    g_out = [o.name for o in model.graph.output]
    if g_out != [t.name for t in task.outputs]:
        raise AuditError(f"{path}: graph outputs {g_out} != task outputs {[t.name for t in task.outputs]}")
    for vi, spec in zip([i for i in model.graph.input if i.name not in inits], task.inputs):
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if dims != list(spec.shape):
            raise AuditError(f"{path}: input {spec.name} has shape {dims}, task.toml says {spec.shape}")
    return model


def run_ort(task: Task, model, feeds: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], float]:
    """Step 2. Reference outputs (name -> array) and the wall ms of one warm run (one thread)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in task.outputs]
    outs = sess.run(names, feeds)
    t0 = time.perf_counter()
    outs = sess.run(names, feeds)
    ms = (time.perf_counter() - t0) * 1e3
    ref = dict(zip(names, outs))
    for spec in task.outputs:
        arr = ref[spec.name]
        if list(arr.shape) != list(spec.shape):
            raise AuditError(f"{task.id}: ORT output {spec.name} has shape {list(arr.shape)}, task.toml says {spec.shape}")
        if arr.dtype != np.dtype(_NP[spec.dtype]):
            raise AuditError(f"{task.id}: ORT output {spec.name} is {arr.dtype}, task.toml says {spec.dtype}")
    return ref, ms


def mutants(task: Task, feeds: dict[str, np.ndarray], ref: dict[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    """Step 3 inputs: mutant name -> full set of outputs a trivial kernel would produce."""
    out: dict[str, dict[str, np.ndarray]] = {"zero": {}, "constant 1": {}, "constant reference mean": {}}
    for name, r in ref.items():
        out["zero"][name] = np.zeros_like(r)
        out["constant 1"][name] = np.ones_like(r)
        mean = float(np.mean(r.astype(np.float64))) if r.size else 0.0
        if r.dtype.kind in "biu":
            mean = round(mean)
        # for a one-element output the mean IS the answer: that mutant is kept only for larger outputs
        out["constant reference mean"][name] = np.full_like(r, mean) if r.size > 1 else np.zeros_like(r)
    for in_name, a in feeds.items():
        same = {n: a for n, r in ref.items() if a.shape == r.shape}
        if same:
            out[f"identity of input {in_name}"] = {n: same.get(n, np.zeros_like(r)) for n, r in ref.items()}
    return out


def check_mutants(task: Task, feeds: dict[str, np.ndarray], ref: dict[str, np.ndarray]) -> list[str]:
    """Step 3. Names of the mutants that PASS verification (should be empty)."""
    passing = []
    for kind, outs in mutants(task, feeds, ref).items():
        if all(compare(outs[n], ref[n], task.tolerance.atol, task.tolerance.rtol).ok for n in ref):
            passing.append(kind)
    return passing


def _import_model_py(task: Task):
    path = task.model_py_path
    name = f"mkb_task_{task.id}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise AuditError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, attr):
            raise AuditError(f"{path}: defines no {attr}")
    return module


def run_torch(task: Task, model, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Step 4. Outputs of ``model.py`` on ``feeds`` (name -> numpy array).

    Raises AuditError when model.py cannot be imported/instantiated, a parameter or persistent buffer
    has no ONNX initializer of the same name and size, get_inputs() disagrees with the task's inputs,
    or forward() returns the wrong number of outputs.
    """
    import torch
    from onnx import numpy_helper

    torch.set_num_threads(1)
    module = _import_model_py(task)
    path = task.model_py_path
    try:
        m = module.Model(*module.get_init_inputs())
    except Exception as exc:  # noqa: BLE001 - any failure is recorded as this task's problem
        raise AuditError(f"{path}: Model(*get_init_inputs()) raised {type(exc).__name__}: {exc}") from None
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    state = m.state_dict()
    new_state = {}
    for key, value in state.items():
        if key.endswith("num_batches_tracked"):
            new_state[key] = value
            continue
        if key not in inits:
            raise AuditError(f"{path}: parameter/buffer {key!r} has no ONNX initializer of that name")
        arr = inits[key]
        if arr.size != value.numel():
            raise AuditError(f"{path}: {key!r} has {value.numel()} elements, initializer has {arr.size}")
        new_state[key] = torch.from_numpy(np.array(arr)).reshape(value.shape).to(value.dtype)
    m.load_state_dict(new_state)
    m.eval()
    sample = module.get_inputs()
    if len(sample) != len(task.inputs):
        raise AuditError(f"{path}: get_inputs() returns {len(sample)} tensors, the task has {len(task.inputs)} inputs")
    for t, spec in zip(sample, task.inputs):
        if list(t.shape) != list(spec.shape) or str(t.dtype).removeprefix("torch.") != spec.dtype:
            raise AuditError(f"{path}: get_inputs() gives {spec.name} as {t.dtype} {list(t.shape)}, "
                             f"task.toml says {spec.dtype} {spec.shape}")
    args = [torch.from_numpy(np.array(feeds[s.name])) for s in task.inputs]
    with torch.no_grad():
        res = m(*args)
    if isinstance(res, torch.Tensor):
        res = (res,)
    res = list(res)
    if len(res) != len(task.outputs):
        raise AuditError(f"{path}: forward() returns {len(res)} outputs, the task has {len(task.outputs)}")
    return {spec.name: r.detach().contiguous().numpy() for spec, r in zip(task.outputs, res)}


#: ops whose onnx.reference kernels are pure-Python loops taking 5-80 s at the suite's sizes; with
#: ``refeval="fast"`` they are not run (the note says so)
SLOW_REFEVAL_OPS = frozenset({"MaxPool", "AveragePool", "ConvTranspose", "RoiAlign"})
#: ops whose onnx.reference kernel is slow only for 5-D inputs (3-D convolution: minutes)
SLOW_REFEVAL_5D_OPS = frozenset({"Conv"})


def refeval_is_slow(task: Task) -> bool:
    """True when onnx.reference would take seconds to minutes on this task (skipped in "fast" mode)."""
    return task.op_type in SLOW_REFEVAL_OPS or (
        task.op_type in SLOW_REFEVAL_5D_OPS and len(task.inputs[0].shape) == 5)


def run_refeval(task: Task, model, feeds: dict[str, np.ndarray], ref: dict[str, np.ndarray],
                mode: str = "fast") -> tuple[bool | None, str]:
    """Step 5. (agrees, note); agrees is None when the evaluator failed or was not run (mode "fast" and a
    slow op, or mode "off")."""
    from onnx.reference import ReferenceEvaluator

    if mode == "off":
        return None, "not run"
    if mode == "fast" and refeval_is_slow(task):
        return None, (f"not run: onnx.reference's {task.op_type} is a pure-Python loop (seconds to minutes "
                      "at this size); use refeval='all'")

    try:
        outs = ReferenceEvaluator(model).run(None, feeds)
    except Exception as exc:  # noqa: BLE001 - any failure is recorded as this task's problem
        return None, f"onnx.reference failed: {type(exc).__name__}: {str(exc)[:200]}"
    notes = []
    for spec, o in zip(task.outputs, outs):
        c = compare(np.asarray(o), ref[spec.name], task.tolerance.atol, task.tolerance.rtol)
        if not c.ok:
            notes.append(f"{spec.name}: onnx.reference != ORT ({c.reason})")
    return (not notes), "; ".join(notes)


def _native_columns(task: Task, nat: dict, ref: dict[str, np.ndarray] | None) -> dict:
    """Step 6 columns from a :func:`kit.suite.mnn_wheel.native` result (facts, never problems)."""
    cols: dict = {
        "native_convert_ok": nat["convert_ok"],
        "native_op_types": " ".join(nat["op_types"]),
        "native_runtime_op_types": " ".join(nat["runtime_op_types"]),
        "native_ms": nat["median_ms"],
        "native_ok": False,
        "native_error": nat["error"],
    }
    wanted = [t for t in task.mnn_op_types if t != "*"]
    if nat["runtime_op_types"]:
        cols["mnn_op_types_seen"] = all(t in nat["runtime_op_types"] for t in wanted)
    if not nat["run_ok"] or ref is None:
        return cols
    bad, worst_abs, worst_rel = [], 0.0, 0.0
    for spec in task.outputs:
        if spec.name not in nat["outputs"]:
            bad.append(f"{spec.name}: missing")
            continue
        with np.errstate(all="ignore"):  # native outputs may hold garbage (NaN/Inf) on MNN bugs
            c = compare(nat["outputs"][spec.name], ref[spec.name], task.tolerance.atol, task.tolerance.rtol)
        worst_abs = max(worst_abs, c.max_abs_err or 0.0)
        worst_rel = max(worst_rel, c.max_rel_err or 0.0)
        if not c.ok:
            bad.append(f"{spec.name}: {c.reason}")
    cols.update(native_ok=not bad, native_max_abs_err=worst_abs, native_max_rel_err=worst_rel)
    if bad:
        cols["native_error"] = "mismatch: " + "; ".join(bad)
    return cols


# ------------------------------------------------------------------------------------------ per task
def audit_task(task: Task, seed: int = 0, torch_check: bool = True, native_result: Callable[[], dict] | None = None,
               refeval: str = "fast") -> dict:
    """Audit one task; returns one row (keys of :data:`COLUMNS`).

    ``native_result`` returns the task's :func:`kit.suite.mnn_wheel.native` result (None: not run).
    """
    row: dict = {k: None for k in COLUMNS}
    row.update(task_id=task.id, category=task.category, op_type=task.op_type, mechanism=task.mechanism,
               split=task.split, atol=task.tolerance.atol, rtol=task.tolerance.rtol)
    problems: list[str] = []
    feeds = make_inputs(task, seed)
    ref = None
    try:
        model = check_structure(task)
        row["structure_ok"] = True
    except AuditError as exc:
        row["structure_ok"] = False
        problems.append(str(exc))
        model = None
    if model is not None:
        try:
            ref, row["ort_ms"] = run_ort(task, model, feeds)
            row["ort_ok"] = True
        except AuditError as exc:
            row["ort_ok"] = False
            problems.append(str(exc))
        except Exception as exc:  # noqa: BLE001 - any failure is recorded as this task's problem
            row["ort_ok"] = False
            problems.append(f"{task.id}: ONNX Runtime failed: {type(exc).__name__}: {str(exc)[:300]}")
    if ref is not None:
        passing = check_mutants(task, feeds, ref)
        row["mutants_ok"] = not passing
        for kind in passing:
            problems.append(f"{task.id}: the {kind} output passes verification (inputs or tolerance too weak)")
        if torch_check:
            try:
                got = run_torch(task, model, feeds)
                worst_abs, worst_rel, bad = 0.0, 0.0, []
                for spec in task.outputs:
                    c = compare(got[spec.name], ref[spec.name], task.tolerance.atol, task.tolerance.rtol)
                    worst_abs = max(worst_abs, c.max_abs_err or 0.0)
                    worst_rel = max(worst_rel, c.max_rel_err or 0.0)
                    if not c.ok:
                        bad.append(f"{spec.name}: {c.reason}")
                row.update(torch_ok=not bad, torch_max_abs_err=worst_abs, torch_max_rel_err=worst_rel)
                if bad:
                    problems.append(f"{task.id}: torch model.py != ONNX Runtime: " + "; ".join(bad))
            except AuditError as exc:
                row["torch_ok"] = False
                problems.append(str(exc))
            except Exception as exc:  # noqa: BLE001 - any failure is recorded as this task's problem
                row["torch_ok"] = False
                tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
                problems.append(f"{task.model_py_path}: running model.py failed: {tb}")
        row["refeval_agrees"], row["refeval_note"] = run_refeval(task, model, feeds, ref, refeval)
    if native_result is not None:
        row.update(_native_columns(task, native_result(), ref))
    row["passed"] = not problems
    row["problems"] = " | ".join(problems)
    return row


def audit(tasks_dir: Path, ids: list[str] | None = None, native: bool = True, torch_check: bool = True,
          progress: Callable[[str, int, int], None] | None = None, seed: int = 0,
          refeval: str = "fast") -> pl.DataFrame:
    """Audit the tasks under ``tasks_dir`` (all, or ``ids``); one row per task, columns :data:`COLUMNS`.

    ``native`` converts and runs every model with the PyPI MNN wheel: one helper process, started
    before any other work, runs them one by one (each in its own subprocess) while this process does
    the in-process checks; forking from this process while numpy/OpenBLAS threads are busy can
    deadlock, so this process forks only once.  ``progress(task_id, done, total)``
    is called after each task.  ``refeval``: "fast" (default; skips :data:`SLOW_REFEVAL_OPS`), "all" or "off".

    Raises:
        kit.tasks.TaskError: a task folder does not load (bad TOML, schema, missing file).
        AuditError: ``torch_check`` is True but torch is not installed, or ``refeval`` is unknown.
    """
    from kit.suite import mnn_wheel

    if torch_check and importlib.util.find_spec("torch") is None:
        raise AuditError("torch_check=True needs torch (install the 'tasks' extra: pip install torch==2.13.0)")
    if refeval not in ("fast", "all", "off"):
        raise AuditError(f"refeval must be 'fast', 'all' or 'off', not {refeval!r}")

    tasks = load_suite(Path(tasks_dir), ids=ids)
    rows = []
    with tempfile.TemporaryDirectory(prefix="mkb-audit-") as tmp:
        root = Path(tmp)
        helper = None
        if native:  # started first: every fork then happens in the helper (see mnn_wheel.start_batch)
            helper = mnn_wheel.start_batch([t.path for t in tasks if t.path is not None], seed, root)
        for k, task in enumerate(tasks, 1):
            getter = (lambda tid=task.id: mnn_wheel.batch_result(root, tid)) if native else None
            rows.append(audit_task(task, seed, torch_check, getter, refeval))
            if progress is not None:
                progress(task.id, k, len(tasks))
        if helper is not None:
            helper.join(timeout=60)
    return pl.DataFrame(rows, schema=COLUMNS, orient="row")


def failed(df: pl.DataFrame) -> list[tuple[str, str]]:
    """(task_id, problems) of every task failing a check other than native MNN."""
    bad = df.filter(~pl.col("passed"))
    return list(zip(bad["task_id"].to_list(), bad["problems"].to_list()))


def write_calibration(df: pl.DataFrame, tasks_dir: Path) -> Path:
    """Write ``tasks_dir/calibration.csv`` (sorted by task id, floats rounded to 6 significant digits)."""
    out = Path(tasks_dir) / "calibration.csv"
    floats = [c for c, t in COLUMNS.items() if t == pl.Float64]
    df = df.sort("task_id").with_columns(
        [pl.col(c).map_elements(lambda v: float(f"{v:.6g}"), return_dtype=pl.Float64) for c in floats]
    )
    df.write_csv(out)
    return out


__all__ = ["COLUMNS", "AuditError", "audit", "audit_task", "failed", "write_calibration"]
