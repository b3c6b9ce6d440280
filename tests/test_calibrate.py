"""kit.score.noisefloor (what `mkb calibrate` writes) on hand-made records: coverage, interval widths, the noise
floor per task, native's own fast_1.0 shares, untimeable tasks."""

from __future__ import annotations

import math

import pytest

from kit.score import noisefloor as calibrate


def _record(task: str, speedup: float | None, lo: float | None, hi: float | None, status: str = "ok",
            untimeable: bool = False) -> dict:
    return {"task_id": task, "status": status, "error_kind": "none", "speedup": speedup, "speedup_ci_low": lo,
            "speedup_ci_high": hi, "native_ms": 1.0, "timing_untimeable": untimeable}


RECORDS = [
    _record("a", 1.00, 0.98, 1.02),
    _record("b", 1.03, 1.01, 1.05),  # the interval misses 1.0: native fast_1.0 and significantly so
    _record("c", 0.97, 0.90, 1.05, untimeable=True),
    _record("d", 1.01, 0.99, 1.04),
    _record("e", None, None, None, status="verify_mismatch"),  # native fails: no interval
]


def test_task_rows_and_summary():
    rows = [calibrate.task_row(r) for r in RECORDS]
    by = {r["task_id"]: r for r in rows}
    assert by["a"]["covers_one"] and not by["b"]["covers_one"] and by["e"]["covers_one"] is None
    assert by["a"]["noise_log"] == pytest.approx(math.log(1.02 / 0.98) / 2)
    assert by["c"]["untimeable"] and not by["e"]["native_passes"]
    s = calibrate.summarize(rows, 0.95)
    assert (s["tasks"], s["native_passes"], s["timed"]) == (5, 4, 4)
    assert s["coverage"] == pytest.approx(3 / 4)
    assert s["ci_width_median"] == pytest.approx((0.04 + 0.05) / 2)  # widths 0.04, 0.04, 0.15, 0.05
    assert s["native_fast_1.0"] == pytest.approx(2 / 4) and s["native_fast_sig_1.0"] == pytest.approx(1 / 4)
    assert s["untimeable"] == ["c"]
    line = calibrate.coverage_line(s)
    assert "contains 1.0 for 3/4 timed tasks (75.0 %)" in line and "significantly on 25.0 %" in line


def test_a_calibration_without_timings():
    s = calibrate.summarize([calibrate.task_row(RECORDS[-1])])
    assert s["timed"] == 0 and s["coverage"] is None
    assert calibrate.coverage_line(s) == "A/A coverage: no task was timed"
