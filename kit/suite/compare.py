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
        if out.size == 0 or np.array_equal(out, ref):
            # equal values, compared without the int64 copies and the division below (bitwise_xor_int32's 1 M
            # elements: 8.2 ms for the copies and errors): the timing stage compares every run's outputs
            return Comparison(True, max_abs_err=0.0, max_rel_err=0.0)
        o = out.astype(np.int64)
        r = ref.astype(np.int64)
        diff = np.abs(o - r)
        mae = float(diff.max())
        mre = float((diff / np.maximum(np.abs(r), 1)).max())
        if mae != 0:
            bad = int((diff != 0).sum())
            return Comparison(False, ErrorKind.VALUE, f"{bad}/{out.size} integer elements differ", mae, mre)
        return Comparison(True, max_abs_err=0.0, max_rel_err=0.0)

    if out.size == 0:
        return Comparison(True, max_abs_err=0.0, max_rel_err=0.0)
    if out.dtype == ref.dtype and _same_bytes(out, ref):
        # what the checks below give for equal bytes (the same NaN and Inf places, every difference 0), at a
        # tenth of the cost: the timing stage compares ~60 outputs of up to 4 MB per candidate
        return Comparison(True, max_abs_err=0.0, max_rel_err=0.0)
    # float64 as the figures were computed; float16/32/64 values are exact in it, so their NaN and Inf places and
    # the finite elements are read without the casts (each a copy)
    o, r = _exact64(out), _exact64(ref)
    if np.isfinite(o).all() and np.isfinite(r).all():
        mae, mre, bad = _errors(o, r, atol, rtol)
    else:
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
        mae, mre, bad = _errors(o[finite], r[finite], atol, rtol)
    if bad:
        return Comparison(
            False,
            ErrorKind.VALUE,
            f"{bad}/{out.size} elements outside atol={atol:g} rtol={rtol:g} (max abs err {mae:.3g})",
            mae,
            mre,
        )
    return Comparison(True, max_abs_err=mae, max_rel_err=mre)


_EXACT = {np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)}


def _exact64(a: np.ndarray) -> np.ndarray:
    """``a`` itself where float64 holds its values exactly (float16/32/64: ufuncs cast them on the fly), else
    its float64 copy (a longer float, rounded as before)."""
    return a if a.dtype in _EXACT else a.astype(np.float64)


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays of one dtype and shape hold the same bytes (so NaNs of the same payload, and -0 vs 0
    differ: the comparison's slow path decides those)."""
    if a.dtype.itemsize not in (1, 2, 4, 8):
        return False
    view = np.dtype(f"u{a.dtype.itemsize}")
    return bool(np.array_equal(np.ascontiguousarray(a).view(view), np.ascontiguousarray(b).view(view)))


def _errors(o: np.ndarray, r: np.ndarray, atol: float, rtol: float) -> tuple[float, float, int]:
    """max |o - r|, max |o - r| / max(|r|, 1e-12) and the count of elements outside ``atol + rtol * |r|``, of finite
    arrays of one shape, all in float64 (the same floats as on float64 copies, with two temporaries)."""
    o, r = np.atleast_1d(o), np.atleast_1d(r)  # a 0-d operand would make each result a scalar, not an array
    diff = np.subtract(o, r, dtype=np.float64)
    np.abs(diff, out=diff)
    mae = float(diff.max())
    absr = np.abs(r, dtype=np.float64)
    den = np.maximum(absr, 1e-12)
    np.divide(diff, den, out=den)
    mre = float(den.max())
    np.multiply(absr, rtol, out=absr)
    absr += atol  # rtol * |r| + atol: the same float as atol + rtol * |r| (addition commutes)
    return mae, mre, int(np.count_nonzero(diff > absr))
