"""ONNX Runtime reference outputs for a task (the ground truth of verification).

One single-threaded CPU InferenceSession per task model, full graph optimizations disabled so the
reference is the plain kernel.  int64/bool outputs are returned as ORT gives them.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import onnxruntime as ort


@lru_cache(maxsize=64)
def _session(path: str, mtime_ns: int) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 3
    return ort.InferenceSession(path, sess_options=opts, providers=["CPUExecutionProvider"])


def run_reference(onnx_path: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run ``onnx_path`` on ``inputs`` (name → array) and return name → output array.

    Raises:
        onnxruntime exceptions for a model ORT cannot load or run (a task defect, caught by the audit).
    """
    sess = _session(str(onnx_path), onnx_path.stat().st_mtime_ns)
    names = [o.name for o in sess.get_outputs()]
    outs = sess.run(names, inputs)
    return {n: np.asarray(o) for n, o in zip(names, outs)}
