"""The checks of one task folder: steps 1-5 of the audit (:mod:`kit.suite.audit` runs them and builds the rows).

1. :func:`check_structure`: ``model.onnx`` is well formed, one node of ``task.op_type`` (plus, for an imported
   task, the shape-only helpers its ``source.helper_ops`` declares), the task's I/O.
2. :func:`run_ort`: ONNX Runtime's reference outputs (declared shapes and dtypes) and wall ms.
3. :func:`check_mutants`: trivial outputs (zero, constants, identity) must fail verification.
4. :func:`run_torch`: ``model.py``'s outputs with the ONNX initializers loaded (torch imported lazily, only
   here).
5. :func:`run_refeval`: ``onnx.reference.ReferenceEvaluator`` against ONNX Runtime (a note, never a failure).

Steps 1, 2 and 4 raise :class:`AuditError` naming the file and the violated rule.
"""

from __future__ import annotations

import importlib.util
import sys
import time

import numpy as np

from kit.suite.compare import compare
from kit.suite.tasks import Task

_NP = {"float32": np.float32, "int32": np.int32, "int64": np.int64, "bool": np.bool_}


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
    declared = sorted(task.source.helper_ops) if task.source is not None else []
    if declared:
        helpers = sorted(n.op_type for n in nodes if n.op_type != task.op_type)
        if len(nodes) != 1 + len(declared) or helpers != declared:
            raise AuditError(f"{path}: graph has {len(nodes)} nodes ({[n.op_type for n in nodes]}), expected one "
                             f"{task.op_type} plus the declared helpers {declared}")
    else:
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


def run_torch(task: Task, model, feeds: dict[str, np.ndarray], float64: bool = False) -> dict[str, np.ndarray]:
    """Step 4. Outputs of ``model.py`` on ``feeds`` (name -> numpy array).  ``float64``: the module and the float
    inputs in double precision (the truth :mod:`kit.suite.tolerance` measures float32 references against).

    Raises AuditError when model.py cannot be imported/instantiated, a parameter or persistent buffer
    has no ONNX initializer of the same name and size (an imported task's is drawn again from its
    ``source.torch_seed`` instead: torch's outputs then show whether it matches), get_inputs() disagrees with the task's inputs,
    or forward() returns the wrong number of outputs.
    """
    import torch
    from onnx import numpy_helper

    torch.set_num_threads(1)
    module = _import_model_py(task)
    path = task.model_py_path
    torch.manual_seed(task.source.torch_seed if task.source is not None else 0)
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
        if key not in inits and task.source is not None:
            new_state[key] = value  # an imported task: drawn again from the export's seed (torch_seed)
            continue
        if key not in inits:
            raise AuditError(f"{path}: parameter/buffer {key!r} has no ONNX initializer of that name")
        arr = inits[key]
        if arr.size != value.numel():
            raise AuditError(f"{path}: {key!r} has {value.numel()} elements, initializer has {arr.size}")
        new_state[key] = torch.from_numpy(np.array(arr)).reshape(value.shape).to(value.dtype)
    m.load_state_dict(new_state)
    m.eval()
    if float64:
        m = m.double()
    sample = module.get_inputs()
    if len(sample) != len(task.inputs):
        raise AuditError(f"{path}: get_inputs() returns {len(sample)} tensors, the task has {len(task.inputs)} inputs")
    for t, spec in zip(sample, task.inputs):
        if list(t.shape) != list(spec.shape) or str(t.dtype).removeprefix("torch.") != spec.dtype:
            raise AuditError(f"{path}: get_inputs() gives {spec.name} as {t.dtype} {list(t.shape)}, "
                             f"task.toml says {spec.dtype} {spec.shape}")
    args = [torch.from_numpy(np.array(feeds[s.name])) for s in task.inputs]
    if float64:
        args = [a.double() if a.is_floating_point() else a for a in args]
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
