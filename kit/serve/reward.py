"""The scalar reward ``mkb serve`` gives beside a verdict's raw fields, for a trainer that wants one number.

    reward = null                                   harness_error (the kit's fault: no signal about the candidate)
           = 0                                      not functionally correct (rejected, compile error, mismatch,
                                                    crash, timeout, worker lost)
           = 1                                      correct, without a significant scorable speedup
           = 1 + clip(ln speedup, -0.5, 2)          correct, and the speedup is scorable and significant

"Correct" is FCR's rule (:func:`kit.results.records.counts_correct`: ``ok``, or ``timing_failed`` for a cause
that is not the candidate's; ``unaccounted_work`` and ``clock_mismatch`` never count); "scorable" is
the metrics' rule (:func:`kit.results.rules.scorable_speedup`: status ``ok``, a positive finite ratio, not
emulated, not untimeable, not flagged implausible); "significant": the speedup's 95 % interval over rounds
(``speedup_ci_low``, ``speedup_ci_high``, :mod:`kit.stages.timing`) excludes 1.  The clip bounds the reward to
[0.5, 3]: a correct kernel never scores below a failed one, and ×e² ≈ 7.4 is as fast as it pays to be.
docs/serve.md gives the same formula.
"""

from __future__ import annotations

import math

from kit.results.records import Record
from kit.results.rules import RETRIED, scorable_speedup
from kit.results.shards import records_frame

#: the bounds of ln(speedup) in the reward
LOG_SPEEDUP_LOW = -0.5
LOG_SPEEDUP_HIGH = 2.0


def significant_speedup(rec: Record) -> float | None:
    """``rec.speedup`` when it may be scored (:func:`kit.results.rules.scorable_speedup`) and its 95 %
    interval excludes 1 (``speedup_ci_low > 1`` or ``speedup_ci_high < 1``); else None."""
    if rec.speedup is None or rec.speedup_ci_low is None or rec.speedup_ci_high is None:
        return None
    if not records_frame([rec]).select(scorable_speedup([])).item():
        return None
    if rec.speedup_ci_low > 1.0 or rec.speedup_ci_high < 1.0:
        return rec.speedup
    return None


def reward(rec: Record) -> float | None:
    """The reward of ``rec`` (module docstring): None, 0.0, 1.0, or 1 + clip(ln speedup, -0.5, 2) in [0.5, 3]."""
    if rec.status in RETRIED:
        return None
    if not rec.correct:
        return 0.0
    speedup = significant_speedup(rec)
    if speedup is None:
        return 1.0
    return 1.0 + min(max(math.log(speedup), LOG_SPEEDUP_LOW), LOG_SPEEDUP_HIGH)
