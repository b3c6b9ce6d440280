"""ONNX Runtime reference outputs for a task (the ground truth of verification).

One single-threaded CPU InferenceSession per task model, full graph optimizations disabled so the
reference is the plain kernel.  int64/bool outputs are returned as ORT gives them.  Inputs of another shape than
the model declares (an edge set's size-1 axis, :mod:`kit.suite.edges`) run on a copy of the model whose inputs
of those names have free dimensions and whose outputs' shapes are left to ORT's inference.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort


def _options() -> ort.SessionOptions:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 3
    return opts


@lru_cache(maxsize=64)
def _session(path: str, mtime_ns: int) -> ort.InferenceSession:
    return ort.InferenceSession(path, sess_options=_options(), providers=["CPUExecutionProvider"])


@lru_cache(maxsize=8)
def _free_session(path: str, mtime_ns: int, free: tuple[str, ...]) -> ort.InferenceSession:
    """A session of the model at ``path`` with every dimension of the graph inputs ``free`` made symbolic and
    the outputs' and intermediate values' shapes dropped (ORT infers them from the inputs it is fed)."""
    model = onnx.load(path)
    for vi in model.graph.input:
        if vi.name in free:
            for k, d in enumerate(vi.type.tensor_type.shape.dim):
                d.dim_param = f"{vi.name}_{k}"
    for vi in model.graph.output:
        vi.type.tensor_type.ClearField("shape")
    del model.graph.value_info[:]
    return ort.InferenceSession(model.SerializeToString(), sess_options=_options(),
                                providers=["CPUExecutionProvider"])


def run_model(model: onnx.ModelProto, inputs: dict[str, np.ndarray], names: list[str]) -> dict[str, np.ndarray]:
    """Outputs ``names`` of an in-memory ``model`` on ``inputs``, with the session options verification's reference
    uses (one thread, no graph optimization); no session cache (a derived copy of a task's model, run once).

    Raises:
        onnxruntime exceptions for a model ORT cannot load or run."""
    sess = ort.InferenceSession(model.SerializeToString(), sess_options=_options(), providers=["CPUExecutionProvider"])
    return dict(zip(names, sess.run(names, inputs)))


def run_reference(onnx_path: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run ``onnx_path`` on ``inputs`` (name → array; an input of another shape than the model's: see the module
    docstring) and return name → output array.

    Raises:
        onnxruntime exceptions for a model ORT cannot load or run (a task defect, caught by the audit).
    """
    sess = _session(str(onnx_path), onnx_path.stat().st_mtime_ns)
    free = tuple(sorted(i.name for i in sess.get_inputs()
                        if i.name in inputs and list(np.shape(inputs[i.name])) != list(i.shape)))
    if free:
        sess = _free_session(str(onnx_path), onnx_path.stat().st_mtime_ns, free)
    names = [o.name for o in sess.get_outputs()]
    outs = sess.run(names, inputs)
    return {n: np.asarray(o) for n, o in zip(names, outs)}
