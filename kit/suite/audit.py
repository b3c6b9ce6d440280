"""Audit of the task suite: is every task well formed, runnable and discriminating?

Per task (see :func:`audit_task`):

1. ``model.onnx`` passes ``onnx.checker`` (full check), imports opset ``task.opset`` and holds exactly
   one node, of ``task.op_type``; its graph inputs/outputs are the task's (initializers are not inputs).
2. ONNX Runtime runs it on ``kit.suite.inputs.make_inputs(task, seed)``; outputs have the declared shapes and
   dtypes (wall ms of one warm run recorded).
3. Mutants fail: an all-zero output, a constant output (1 and the reference mean) and, where an input
   has the output's shape, the identity output must each FAIL ``kit.suite.compare.compare`` against the
   reference with the task's tolerance.
4. PyTorch eager (``model.py``: ``Model(*get_init_inputs())``, parameters and persistent buffers loaded
   from the ONNX initializers of the same name) equals ONNX Runtime within the task tolerance, and
   ``get_inputs()`` yields the task's input shapes and dtypes.  (Skipped when ``torch_check`` is False.)
5. ``onnx.reference.ReferenceEvaluator`` is compared with ONNX Runtime: a disagreement is REPORTED in
   ``refeval_note``, never a failure.
6. Native MNN from the PyPI wheel converts and runs the model in a subprocess (``kit.suite.mnn_wheel``):
   pass/fail, errors, wall ms and the executed op types are recorded facts, never a failure of the
   audit (``mnn_op_types_seen``: every op type of task.toml's ``mnn_op_types`` was executed).  Beside the
   task's tolerance: ``native_tol_ratio`` (max |native - ORT| / (atol + rtol |ORT|)), ``native_over_tolerance``
   (that ratio above 1: native's error exceeds the task's, e.g. derived, tolerance) and ``native_ok_at_paper``
   (native passes at the paper's tolerance, ``paper_atol``).  The wheel is not
   the MNN the kit times: :mod:`kit.outline.taskaudit` adds the pinned tree's native build beside it.

Only steps 1-4 decide ``passed``.  Steps 1-5 are in :mod:`kit.suite.checks`; torch is imported lazily, only
in :func:`kit.suite.checks.run_torch`.
"""

from __future__ import annotations

import importlib.util
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

from kit.suite.checks import (
    SLOW_REFEVAL_5D_OPS,
    SLOW_REFEVAL_OPS,
    AuditError,
    check_mutants,
    check_structure,
    mutants,
    refeval_is_slow,
    run_ort,
    run_refeval,
    run_torch,
)
from kit.suite.compare import compare
from kit.suite.inputs import make_inputs
from kit.suite.tasks import Task, load_suite

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
    "tol_method": pl.Utf8,
    "paper_atol": pl.Float64,
    "native_tol_ratio": pl.Float64,
    "native_over_tolerance": pl.Boolean,
    "native_ok_at_paper": pl.Boolean,
}


def _compare_outputs(task: Task, got: dict[str, np.ndarray],
                     ref: dict[str, np.ndarray]) -> tuple[list[str], float, float]:
    """Each task output in ``got`` (torch's or native MNN's) against ONNX Runtime's ``ref``, task tolerance.

    Returns ``(bad, worst_abs, worst_rel)``: one "name: missing" or "name: reason" per output that is
    absent or fails :func:`kit.suite.compare.compare`, and the largest max abs/rel error over the outputs
    compared (0.0 when none).
    """
    bad, worst_abs, worst_rel = [], 0.0, 0.0
    for spec in task.outputs:
        if spec.name not in got:
            bad.append(f"{spec.name}: missing")
            continue
        c = compare(got[spec.name], ref[spec.name], task.tolerance.atol, task.tolerance.rtol)
        worst_abs = max(worst_abs, c.max_abs_err or 0.0)
        worst_rel = max(worst_rel, c.max_rel_err or 0.0)
        if not c.ok:
            bad.append(f"{spec.name}: {c.reason}")
    return bad, worst_abs, worst_rel


def tolerance_ratio(task: Task, got: dict[str, np.ndarray], ref: dict[str, np.ndarray]) -> float | None:
    """max |got - ref| / (atol + rtol |ref|) over the float outputs of ``task`` (finite elements, task tolerance):
    above 1, ``got`` exceeds the tolerance; None when no float output of the reference's shape was compared."""
    ratios = []
    tol = task.tolerance
    for spec in task.outputs:
        g, r = got.get(spec.name), ref.get(spec.name)
        if g is None or r is None or spec.dtype != "float32" or np.shape(g) != np.shape(r):
            continue
        with np.errstate(all="ignore"):
            rr = np.asarray(r, dtype=np.float64)
            q = np.abs(np.asarray(g, dtype=np.float64) - rr) / (tol.atol + tol.rtol * np.abs(rr) + 1e-300)
        q = q[np.isfinite(q)]
        if q.size:
            ratios.append(float(q.max()))
    return max(ratios) if ratios else None


def _paper_ok(task: Task, got: dict[str, np.ndarray], ref: dict[str, np.ndarray]) -> bool:
    """Whether every output of ``got`` passes at the paper's tolerance (atol = rtol = ``tolerance.paper_atol``)."""
    p = task.tolerance.paper_atol
    return all(spec.name in got and compare(got[spec.name], ref[spec.name], p, p).ok for spec in task.outputs)


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
    with np.errstate(all="ignore"):  # native outputs may hold garbage (NaN/Inf) on MNN bugs
        bad, worst_abs, worst_rel = _compare_outputs(task, nat["outputs"], ref)
        ratio = tolerance_ratio(task, nat["outputs"], ref)
        paper_ok = _paper_ok(task, nat["outputs"], ref)
    cols.update(native_ok=not bad, native_max_abs_err=worst_abs, native_max_rel_err=worst_rel,
                native_tol_ratio=ratio, native_over_tolerance=ratio is not None and ratio > 1,
                native_ok_at_paper=paper_ok)
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
               split=task.split, atol=task.tolerance.atol, rtol=task.tolerance.rtol,
               tol_method=task.tolerance.method, paper_atol=task.tolerance.paper_atol)
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
                bad, worst_abs, worst_rel = _compare_outputs(task, got, ref)
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
        kit.suite.tasks.TaskError: a task folder does not load (bad TOML, schema, missing file).
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


__all__ = [
    "COLUMNS", "SLOW_REFEVAL_5D_OPS", "SLOW_REFEVAL_OPS", "AuditError", "audit", "audit_task",
    "check_mutants", "check_structure", "failed", "mutants", "refeval_is_slow", "run_ort", "run_refeval",
    "run_torch", "write_calibration",
]
