"""Seeded inputs for a task (one input set per verification trial).

The same ``(task, seed)`` always gives the same arrays (numpy PCG64 seeded with ``seed`` and the
task id), so the audit, verification of every candidate and native timing all see identical data.
"""

from __future__ import annotations

import hashlib

import numpy as np

from kit.suite.tasks import Task, TensorSpec

_NP = {"float32": np.float32, "int32": np.int32, "int64": np.int64, "bool": np.bool_}


def _draw(spec: TensorSpec, rng: np.random.Generator) -> np.ndarray:
    shape = tuple(spec.shape)
    if spec.distribution == "bool" or spec.dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if spec.distribution == "integers" or spec.dtype in ("int32", "int64"):
        lo, hi = int(spec.low), int(spec.high)
        return rng.integers(lo, hi + 1, size=shape).astype(_NP[spec.dtype])
    if spec.distribution == "normal":
        a = rng.normal(spec.low, spec.high, size=shape)
    elif spec.distribution == "positive":
        lo = max(spec.low, 1e-3)
        a = rng.uniform(lo, spec.high, size=shape)
    else:
        a = rng.uniform(spec.low, spec.high, size=shape)
    return a.astype(_NP[spec.dtype])


def make_inputs(task: Task, seed: int) -> dict[str, np.ndarray]:
    """Arrays for every graph input of ``task`` (name → array with the spec's shape and dtype).

    The generator is seeded with sha256(task.id) mixed with ``seed``.
    """
    key = int.from_bytes(hashlib.sha256(task.id.encode()).digest()[:8], "little")
    rng = np.random.Generator(np.random.PCG64([key, seed]))
    return {spec.name: _draw(spec, rng) for spec in task.inputs}
