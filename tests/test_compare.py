"""kit.suite.compare: the float comparison's figures are numpy.allclose's, computed in float64, whichever of its
paths (equal bytes, all finite, NaN/Inf present) gives them."""

from __future__ import annotations

import numpy as np
import pytest

from kit.results.records import ErrorKind
from kit.suite.compare import compare


def plain(out: np.ndarray, ref: np.ndarray, atol: float, rtol: float) -> tuple[float, float, int]:
    """max abs error, max rel error and the count outside the tolerance, on float64 copies of the finite
    elements (the definition the comparison's docstring gives)."""
    o, r = out.astype(np.float64), ref.astype(np.float64)
    finite = np.isfinite(r)
    diff = np.abs(o[finite] - r[finite])
    return (float(diff.max()), float((diff / np.maximum(np.abs(r[finite]), 1e-12)).max()),
            int((diff > atol + rtol * np.abs(r[finite])).sum()))


@pytest.mark.parametrize("dt_out,dt_ref", [(np.float32, np.float32), (np.float16, np.float32),
                                           (np.float32, np.float64), (np.float64, np.float64)])
def test_figures_are_the_float64_ones(dt_out, dt_ref) -> None:
    rng = np.random.default_rng(7)
    for scale in (1e-7, 1e-3, 1.0, 1e5 if dt_out != np.float16 else 1e2):  # float16's max is 65504
        ref = (rng.standard_normal((3, 5, 7)) * scale).astype(dt_ref)
        out = (ref + rng.standard_normal(ref.shape) * scale * 1e-3).astype(dt_out)
        for atol, rtol in ((1e-4, 1e-4), (0.0, 0.0), (1e-2, 1e-3)):
            mae, mre, bad = plain(out, ref, atol, rtol)
            got = compare(out, ref, atol, rtol)
            assert (got.max_abs_err, got.max_rel_err) == (mae, mre)
            assert got.ok == (bad == 0) and (got.ok or got.reason.startswith(f"{bad}/{out.size} elements outside"))


def test_nan_inf_places_and_non_contiguous() -> None:
    ref = np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6)
    ref[0, 1], ref[2, 3], ref[3, 0] = np.nan, np.inf, -np.inf
    out = ref.copy()
    out[1, 1] += np.float32(1e-3)
    mae, mre, _ = plain(out, ref, 1e-4, 1e-4)
    got = compare(out, ref)
    assert (got.ok, got.kind, got.max_abs_err, got.max_rel_err) == (False, ErrorKind.VALUE, mae, mre)
    assert compare(out[:, ::2], ref[:, ::2]).max_abs_err == plain(out[:, ::2], ref[:, ::2], 1e-4, 1e-4)[0]
    moved = ref.copy()
    moved[0, 1], moved[0, 2] = 0.0, np.nan
    assert compare(moved, ref).kind == ErrorKind.NAN
    flipped = ref.copy()
    flipped[2, 3] = -np.inf
    assert (compare(flipped, ref).kind, compare(flipped, ref).reason) == (ErrorKind.NAN, "Inf placement or sign differs")


def test_equal_bytes_and_signed_zero() -> None:
    ref = np.array([[0.0, 1.5, np.nan], [np.inf, -3.0, 2.0]], dtype=np.float32)
    assert compare(ref.copy(), ref) == compare(ref.astype(np.float64), ref)  # equal bytes, or equal values
    got = compare(ref.copy(), ref)
    assert (got.ok, got.max_abs_err, got.max_rel_err) == (True, 0.0, 0.0)
    negzero = ref.copy()
    negzero[0, 0] = -0.0  # other bytes, the same value
    got = compare(negzero, ref)
    assert (got.ok, got.max_abs_err, got.max_rel_err) == (True, 0.0, 0.0)
    scalar = np.array(-2.489335, dtype=np.float32)  # 0-d: a reduction's output
    got = compare(scalar, np.array(-2.4893363, dtype=np.float32), 1e-5, 1e-5)
    assert (got.ok, got.max_abs_err) == (True, plain(scalar.reshape(1), np.array([-2.4893363], np.float32), 0, 0)[0])
    all_nan = np.full(3, np.nan, dtype=np.float32)
    assert compare(all_nan, all_nan.copy()).ok


@pytest.mark.parametrize("dt_ref", [np.int32, np.int64, np.bool_, np.uint8])
def test_integer_outputs_are_compared_by_value(dt_ref) -> None:
    # MNN's int32 against ONNX Runtime's int32, int64, bool or uint8: equal values pass with zero errors, one value
    # off fails naming the count, whatever path decides
    rng = np.random.default_rng(3)
    ref = rng.integers(0, 2 if dt_ref == np.bool_ else 200, (4, 257)).astype(dt_ref)
    out = ref.astype(np.int32)
    got = compare(out, ref)
    assert (got.ok, got.max_abs_err, got.max_rel_err) == (True, 0.0, 0.0)
    out[2, 100] = int(ref[2, 100]) + 3
    got = compare(out, ref)
    assert (got.ok, got.kind, got.reason, got.max_abs_err) == (False, ErrorKind.VALUE, "1/1028 integer elements differ", 3.0)
    assert compare(np.zeros((0, 3), np.int32), np.zeros((0, 3), dt_ref)).ok
    assert compare(np.zeros(3, np.int32), np.zeros(4, dt_ref)).kind == ErrorKind.SHAPE
