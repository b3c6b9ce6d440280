"""Compare one output tensor with its ONNX Runtime reference.

The check is numpy.allclose's: ``|out - ref| <= atol + rtol * |ref|`` element-wise, after checking the
shape, the dtype family and NaN/Inf placement.  MNN has no int64 or bool tensors at run time (both
arrive as int32), so an int32 output is accepted for an int64 or bool reference and compared by value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kit.results.records import ErrorKind


@dataclass(frozen=True)
class Comparison:
    """Result of :func:`compare`.

    ``max_abs_err`` = max |out - ref|; ``max_rel_err`` = max |out - ref| / max(|ref|, 1e-12), both over
    finite elements (None when the shapes differ or nothing is finite).
    """

    ok: bool
    kind: ErrorKind = ErrorKind.NONE
    reason: str = ""
    max_abs_err: float | None = None
    max_rel_err: float | None = None


_INT_LIKE = {np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.bool_), np.dtype(np.uint8), np.dtype(np.int8)}


def compare(out: np.ndarray, ref: np.ndarray, atol: float = 1e-4, rtol: float = 1e-4) -> Comparison:
    """Compare ``out`` (engine) with ``ref`` (ONNX Runtime).

    Args:
        out, ref: arrays of any shape; float32/float64 or integer/bool.
        atol, rtol: absolute and relative tolerance (task.toml ``[tolerance]``).
    Returns:
        a :class:`Comparison`; ``kind`` is SHAPE, DTYPE, NAN or VALUE when ``ok`` is False.
    """
    out = np.asarray(out)
    ref = np.asarray(ref)
    if out.shape != ref.shape:
        # a 0-d vs 1-element mismatch is still a shape mismatch: the task fixes the output shape
        return Comparison(False, ErrorKind.SHAPE, f"shape {list(out.shape)} != reference {list(ref.shape)}")
    ref_is_float = np.issubdtype(ref.dtype, np.floating)
    out_is_float = np.issubdtype(out.dtype, np.floating)
    if ref_is_float != out_is_float:
        return Comparison(False, ErrorKind.DTYPE, f"dtype {out.dtype} incompatible with reference {ref.dtype}")
    if not ref_is_float:
        if out.dtype not in _INT_LIKE or ref.dtype not in _INT_LIKE:
            return Comparison(False, ErrorKind.DTYPE, f"dtype {out.dtype} incompatible with reference {ref.dtype}")
        o = out.astype(np.int64)
        r = ref.astype(np.int64)
        if out.size == 0:
            return Comparison(True, max_abs_err=0.0, max_rel_err=0.0)
        diff = np.abs(o - r)
        mae = float(diff.max())
        mre = float((diff / np.maximum(np.abs(r), 1)).max())
        if mae != 0:
            bad = int((diff != 0).sum())
            return Comparison(False, ErrorKind.VALUE, f"{bad}/{out.size} integer elements differ", mae, mre)
        return Comparison(True, max_abs_err=0.0, max_rel_err=0.0)

    o = out.astype(np.float64)
    r = ref.astype(np.float64)
    if out.size == 0:
        return Comparison(True, max_abs_err=0.0, max_rel_err=0.0)
    o_nan, r_nan = np.isnan(o), np.isnan(r)
    o_inf, r_inf = np.isinf(o), np.isinf(r)
    if (o_nan != r_nan).any():
        n = int((o_nan != r_nan).sum())
        return Comparison(False, ErrorKind.NAN, f"NaN placement differs in {n}/{out.size} elements")
    if (o_inf != r_inf).any() or (np.sign(o[o_inf]) != np.sign(r[r_inf])).any():
        return Comparison(False, ErrorKind.NAN, "Inf placement or sign differs")
    finite = ~(r_nan | r_inf)
    if not finite.any():
        return Comparison(True, max_abs_err=0.0, max_rel_err=0.0)
    diff = np.abs(o[finite] - r[finite])
    mae = float(diff.max())
    mre = float((diff / np.maximum(np.abs(r[finite]), 1e-12)).max())
    bad = diff > atol + rtol * np.abs(r[finite])
    if bad.any():
        return Comparison(
            False,
            ErrorKind.VALUE,
            f"{int(bad.sum())}/{out.size} elements outside atol={atol:g} rtol={rtol:g} (max abs err {mae:.3g})",
            mae,
            mre,
        )
    return Comparison(True, max_abs_err=mae, max_rel_err=mre)
