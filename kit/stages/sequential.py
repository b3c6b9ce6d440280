"""Repeated confidence intervals over the looks of an adaptive timing, and the rule that stops it.

A timing looks at its paired log ratios ``d_r`` (:mod:`kit.stages.speedup`) after ``n_1 < n_2 < ... < n_K``
rounds, planned before it starts (:mod:`kit.stages.runplan`), and may stop at any look.  An interval that is
valid at a fixed number of rounds is not valid at a number chosen by looking at it; a **repeated confidence
interval** (RCI) is: the K intervals hold *simultaneously* with probability ``>= confidence``, so the one at
whatever look the timing stopped holds too, whatever the stopping rule (Jennison & Turnbull, "Repeated
confidence intervals for group sequential clinical trials", Controlled Clinical Trials 5, 1984; Jennison &
Turnbull, *Group Sequential Methods with Applications to Clinical Trials*, 2000, ch. 9).

Construction: the two-sided error ``alpha = 1 - confidence`` is spent over the information fractions
``t_k = n_k / n_K`` by the power family ``alpha(t) = alpha * t**RHO`` with :data:`RHO` = 6 (Kim & DeMets,
"Design and analysis of group sequential tests based on the type I error spending rate function", Biometrika 74,
1987; Jennison & Turnbull 2000, sec. 7.2): very little at early looks (0.0023 at 6 of 10 rounds), so the last
look's boundary is within 0.2 % of a fixed protocol's (1.964 against 1.960 for looks 6 and 10) and an A/A
interval that runs every round is as wide as the fixed one; Lan & DeMets' O'Brien–Fleming-type function
(Biometrika 70, 1983; 0.011 at 6 of 10, last boundary 1.999) made it 2.4 % wider, measured on the same rounds of
166 A/A tasks, for eight more early stops of A/A tasks and none more of the sample set's candidates.  The critical
values ``c_k`` of the standardized statistics (correlation ``sqrt(n_i / n_j)``) are found look by look so that
``P(|Z_1| < c_1, ..., |Z_{k-1}| < c_{k-1}, |Z_k| >= c_k) = alpha(t_k) - alpha(t_{k-1})`` under the null, by
numerical integration of the density of the score on a grid (Armitage, McPherson & Rowe, JRSS A 132, 1969;
Jennison & Turnbull 2000, ch. 19).  The variance is unknown: the RCI at look k is ``mean(d) +- t_{1-p_k/2,
n_k-1} sd(d) / sqrt(n_k)`` with ``p_k = 2 - 2 Phi(c_k)``, the nominal level of the normal boundary carried to
Student's t (the "significance level" approach, Jennison & Turnbull 2000).  With one look (``n_1 = n_K``: a
fixed protocol) ``c_1 = z_{1-alpha/2}`` and the RCI is the paired t-interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache, partial

import numpy as np

from kit.stages.speedup import t_quantile

#: grid points over the continuation region per look (the crossing probabilities are exact to ~1e-6)
_GRID = 2001

#: why a timing stopped: its interval decided every fast_p threshold, was narrower than ``timing.stop_width``,
#: or ``timing.rounds_max`` rounds had run; or, without a native side (no speedup to decide: MNN has no kernel
#: or converter for the op), at the first look
STOP_DECIDED, STOP_WIDTH, STOP_MAX, STOP_ALONE = "decided", "width", "max", "alone"


def _ndtr(x: np.ndarray | float) -> np.ndarray:
    from scipy import special  # noqa: PLC0415  (scipy loads only where an interval is computed)

    return special.ndtr(x)


def _z(p: float) -> float:
    """The standard normal quantile of ``p``."""
    from scipy import special  # noqa: PLC0415

    return float(special.ndtri(p))


#: the exponent of the power family of error spending functions (:func:`spent`)
RHO = 6


def spent(t: float, alpha: float) -> float:
    """The two-sided error spent by information fraction ``t`` (0 < t <= 1): the power family ``alpha *
    t**RHO`` (Kim & DeMets 1987; ``alpha`` at ``t = 1``).

    Raises:
        ValueError: ``t`` outside (0, 1] or ``alpha`` outside (0, 1)."""
    if not 0 < t <= 1 or not 0 < alpha < 1:
        raise ValueError(f"information fraction {t} must be in (0, 1] and alpha {alpha} in (0, 1)")
    return alpha * t**RHO


def _exit_prob(s: np.ndarray, f: np.ndarray, step: float, var: float, b: float) -> float:
    """P(|S + X| >= b) for S with density ``f`` on grid ``s`` (spacing ``step``), X ~ N(0, var)."""
    sd = math.sqrt(var)
    tail = _ndtr((-b - s) / sd) + _ndtr((s - b) / sd)
    return float(np.sum(f * tail) * step)


def _solve(target: float, prob, lo: float, hi: float) -> float:
    """The ``b`` in [lo, hi] with ``prob(b) = target`` (``prob`` decreasing), by bisection to 1e-9."""
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if prob(mid) > target else (lo, mid)
        if hi - lo < 1e-9:
            break
    return (lo + hi) / 2


@lru_cache(maxsize=64)
def boundaries(looks: tuple[int, ...], alpha: float) -> tuple[float, ...]:
    """The two-sided critical values ``c_k`` of the standardized statistic at each look (``looks``: the rounds
    ``n_1 < ... < n_K`` at the looks) spending ``alpha`` by :func:`spent` over ``t_k = n_k / n_K`` (the
    method: the module's docstring).  One look: ``(z_{1-alpha/2},)``.

    Raises:
        ValueError: ``looks`` is empty or not strictly increasing and positive."""
    if not looks or any(n <= 0 for n in looks) or any(b <= a for a, b in zip(looks, looks[1:])):
        raise ValueError(f"looks {list(looks)} must be positive and strictly increasing")
    total = looks[-1]
    spent_by = [spent(n / total, alpha) for n in looks]
    # the score S_k (a sum of n_k standard normals) on a grid over the region where no earlier look stopped
    c = [_z(1 - spent_by[0] / 2)]
    bound = c[0] * math.sqrt(looks[0])
    s = np.linspace(-bound, bound, _GRID)
    f = np.exp(-s**2 / (2 * looks[0])) / math.sqrt(2 * math.pi * looks[0])
    for k in range(1, len(looks)):
        step, var = float(s[1] - s[0]), float(looks[k] - looks[k - 1])
        target = max(spent_by[k] - spent_by[k - 1], 1e-12)
        b = _solve(target, partial(_exit_prob, s, f, step, var), 0.0, 20.0 * math.sqrt(looks[k]))
        c.append(b / math.sqrt(looks[k]))
        if k == len(looks) - 1:
            break  # no later look needs the density past the last one (its 2001 x 2001 kernel took ~0.14 s)
        new = np.linspace(-b, b, _GRID)
        # density of S_k restricted to |S_k| < b: the convolution of f with N(0, var)
        kern = np.exp(-((new[:, None] - s[None, :]) ** 2) / (2 * var)) / math.sqrt(2 * math.pi * var)
        f, s = kern @ f * step, new
    return tuple(c)


def nominal_levels(looks: tuple[int, ...], alpha: float) -> tuple[float, ...]:
    """The nominal two-sided level ``p_k = 2 - 2 Phi(c_k)`` of each look's boundary (:func:`boundaries`)."""
    return tuple(float(2 - 2 * _ndtr(c)) for c in boundaries(tuple(looks), alpha))


def rci(d: Sequence[float], looks: Sequence[int], confidence: float) -> tuple[float, float]:
    """The repeated confidence interval of mean(``d``) (log ratios, one per round) at the look with
    ``len(d)`` rounds of the plan ``looks``, at simultaneous ``confidence``: ``mean +- t_{1-p_k/2, n-1} sd /
    sqrt(n)`` (the module's docstring).

    Raises:
        ValueError: ``len(d)`` is not one of ``looks``, or is below 2."""
    x = np.asarray(d, dtype=np.float64)
    n, plan = x.size, tuple(looks)
    if n < 2 or n not in plan:
        raise ValueError(f"{n} rounds is not a look of the plan {list(plan)} (or fewer than 2)")
    p = nominal_levels(plan, 1 - confidence)[plan.index(n)]
    half = t_quantile(1 - p / 2, n - 1) * float(np.std(x, ddof=1)) / math.sqrt(n)
    mean = float(np.mean(x))
    return mean - half, mean + half


def stop_reason(ci: tuple[float, float], speedup: float, thresholds: Sequence[float], stop_width: float) -> str | None:
    """Why a timing may stop with the speedup interval ``ci`` (ratios, not logs) around ``speedup``:
    :data:`STOP_DECIDED` when no threshold of ``thresholds`` (fast_p's p) lies within ``[ci_low, ci_high]`` (so
    the interval lies wholly between two adjacent ones, or beyond the last), :data:`STOP_WIDTH` when its width
    relative to the speedup ``(ci_high - ci_low) / speedup`` is below ``stop_width``; None: go on."""
    lo, hi = ci
    if not any(lo <= p <= hi for p in thresholds):
        return STOP_DECIDED
    if (hi - lo) / speedup < stop_width:
        return STOP_WIDTH
    return None
