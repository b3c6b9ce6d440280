"""The between-run component of a speedup's variance: what moves between two runs of the same timing (memory
layout, CPU frequency, the host's other load) and is therefore not in one run's interval, which is over that
run's rounds only.

Model (random effects, per group j and run i; a group is a task, or one of a task's A/A pair and candidates):
``y_ij = mu_j + u_ij + e_ij``, ``y`` the log speedup (or log time) that run measured, ``mu_j`` the group's true
value, ``u_ij ~ N(0, tau^2)`` the run's own effect and ``e_ij ~ N(0, se_ij^2)`` the within-run error, ``se_ij``
known from that run's rounds.

**Estimator** (:func:`estimate`): the method of moments of DerSimonian & Laird ("Meta-analysis in clinical
trials", *Controlled Clinical Trials* 7, 1986), with weights ``w_ij = 1 / se_ij^2`` and a mean of its
own per group (the moment estimator of a random-effects meta-regression on group indicators; Raudenbush,
"Analyzing effect sizes: random-effects models", in *The Handbook of Research Synthesis and Meta-Analysis*,
2nd ed., 2009, ch. 16)::

    Q_j   = sum_i w_ij (y_ij - ybar_j)^2,   ybar_j = sum_i w_ij y_ij / sum_i w_ij
    c_j   = sum_i w_ij - sum_i w_ij^2 / sum_i w_ij
    tau^2 = max(0, (sum_j Q_j - sum_j (k_j - 1)) / sum_j c_j)            (k_j runs of group j)

Pooled over every group with at least 2 runs, never below :data:`FLOOR_LOG_SD`; per task (the same formula over
that task's groups) only for a task with at least :data:`MIN_TASK_RUNS` - 1 degrees of freedom, and never below
the pooled figure (with 4 degrees of freedom a task's estimate is often far below its truth by chance: a task
noisier than the rest gets its own figure, one that looks quieter does not get a stricter rule).  The result is ``tau`` (``log_sd``, the
standard deviation of a run's effect on the log scale).

**Use** (:func:`differ`): two speedups of one candidate from separate runs differ when
``|ln s1 - ln s2| > z * sqrt(se1^2 + se2^2 + 2 tau^2)``, ``z`` the normal quantile of the confidence and
``se = ln(ci_high / ci_low) / (2 z)`` recovered from each side's interval (its own quantile is Student's t or
the repeated interval's boundary, wider than ``z``: the recovered ``se`` errs on the wide side).

**Sources**: separate A/A calibrations (:func:`points_from_calibration`, ``y`` = ln of the A/A speedup),
separate evaluations of the same candidates (:func:`points_from_records`, ``y`` = ln of a candidate's speedup:
what moves a candidate's code against native's, which two copies of native do not show), and the baseline
tables' native times of separate runs (:func:`points_from_rounds`, ``y`` = the mean ln of one run's round
medians of a task: the between-run sd of one side's time, which the tables keep per host).
**Without an estimate** the kit uses :data:`DEFAULT_LOG_SD` and says so (:func:`default_tau`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from statistics import NormalDist

import polars as pl

from kit.results import rules as scoring

#: the file of a run directory that holds an A/A calibration and its between-run estimate (``mkb calibrate``)
CALIBRATION_FILE = "calibration.json"
#: the fewest runs of one task for a per-task tau (fewer: the pooled one); 5 runs give 4 degrees of freedom
MIN_TASK_RUNS = 5
#: the least tau ever used from an estimate (ln scale, 1 %): a DerSimonian-Laird estimate is 0 whenever the runs
#: scatter less than their own intervals say, which a few runs often do by chance
FLOOR_LOG_SD = 0.01
#: tau without any estimate for the host (ln scale, 6 %).  Chosen from the one cross-run pair measured (issue
#: 27: layernorm's correct sample, 0.231x [0.21, 0.253] then 0.19x [0.176, 0.205] on the same loaded 2-core VM
#: 30 minutes apart: within noise for tau >= 0.056, not below) and the drift of the fixture engine's native
#: times over 3 runs on that VM (largest/smallest 1.11 for fx_argmax, a range of about 1.7 sd: sd ~ 0.06); a
#: candidate made 20 % slower (ln 1.25 = 0.223) with intervals as wide as layernorm's is still different at it
DEFAULT_LOG_SD = 0.06


@dataclass(frozen=True)
class Tau:
    """A between-run standard deviation of log speedup (``log_sd``) and where it came from: ``source`` in words
    (a file, ``default``), ``runs`` (the separate runs it was estimated from; 0 for the default), ``scope``
    (``task``, ``pooled`` or ``default``)."""

    log_sd: float
    source: str
    runs: int = 0
    scope: str = "pooled"

    def text(self) -> str:
        pct = 100 * math.expm1(self.log_sd)
        if self.scope == "default":
            return f"between-run sd {pct:.1f} %, the default: {self.source}"
        return f"between-run sd {pct:.1f} %, {self.scope} estimate of {self.runs} runs from {self.source}"


def _moments(runs: list[tuple[float, float]]) -> tuple[float, int, float] | None:
    """``(Q_j, k_j - 1, c_j)`` of one task's ``runs`` (``(y, se)`` pairs), None with fewer than 2 usable runs
    (a run without a positive finite se carries no weight)."""
    pts = [(y, se) for y, se in runs if math.isfinite(y) and se is not None and math.isfinite(se) and se > 0]
    if len(pts) < 2:
        return None
    w = [1.0 / se**2 for _y, se in pts]
    sw = sum(w)
    ybar = sum(wi * y for wi, (y, _se) in zip(w, pts)) / sw
    q = sum(wi * (y - ybar) ** 2 for wi, (y, _se) in zip(w, pts))
    return q, len(pts) - 1, sw - sum(wi * wi for wi in w) / sw


def dl_tau2(groups: Iterable[list[tuple[float, float]]]) -> tuple[float, int, int]:
    """DerSimonian-Laird tau^2 (module docstring) over ``groups`` (one list of ``(y, se)`` per task, y and se on
    the log scale); returns ``(tau^2, degrees of freedom sum_j (k_j - 1), runs used)``; ``(nan, 0, 0)`` when no
    group has 2 usable runs."""
    q = df = c = 0.0
    used = 0
    for g in groups:
        m = _moments(g)
        if m is None:
            continue
        q, df, c, used = q + m[0], df + m[1], c + m[2], used + m[1] + 1
    if df == 0 or c <= 0:
        return math.nan, 0, 0
    return max(0.0, (q - df) / c), int(df), used


def task_of(key: str) -> str:
    """The task id of an :func:`estimate` group key (``task_id`` or ``task_id@group``)."""
    return key.split("@", 1)[0]


def estimate(by_task: Mapping[str, list[tuple[float, float]]]) -> dict:
    """The between-run figures of ``by_task`` (a group key -> one ``(y, se)`` per separate run; the key is a task
    id, or ``task_id@group`` where one task has several groups, each with a mean of its own: the A/A pair, each
    candidate of it): ``{"method", "pooled": {"log_sd", "log_sd_raw", "runs", "tasks", "df", "points"} or None,
    "tasks": {task_id: {"log_sd", "log_sd_raw", "runs"}}}``, the per-task entries (over that task's groups) only
    for tasks with >= :data:`MIN_TASK_RUNS` - 1 degrees of freedom (5 runs of one group), each at least the
    pooled ``log_sd`` (module docstring)."""
    tau2, df, used = dl_tau2(by_task.values())
    pooled = None
    if df:
        n_tasks = len({task_of(k) for k, g in by_task.items() if _moments(g) is not None})
        pooled = {"log_sd": max(FLOOR_LOG_SD, math.sqrt(tau2)), "log_sd_raw": math.sqrt(tau2), "runs": max(
            len(g) for g in by_task.values()), "tasks": n_tasks, "df": df, "points": used}
    groups: dict[str, list[list[tuple[float, float]]]] = {}
    for key, g in by_task.items():
        groups.setdefault(task_of(key), []).append(g)
    tasks = {}
    for tid, gs in sorted(groups.items()):
        t2, tdf, used_t = dl_tau2(gs)
        if tdf >= MIN_TASK_RUNS - 1 and pooled is not None:
            tasks[tid] = {"log_sd": max(pooled["log_sd"], math.sqrt(t2)), "log_sd_raw": math.sqrt(t2), "runs": used_t}
    return {"method": "DerSimonian-Laird moments, a mean per task and group", "pooled": pooled, "tasks": tasks}


def points_from_calibration(data: Mapping, confidence: float = 0.95) -> dict[str, tuple[float, float]]:
    """Task id -> ``(ln speedup, se)`` of one A/A calibration's content ``data`` (``calibration.json``: its
    ``tasks`` entries with a speedup and an interval; ``se`` recovered from the interval as :func:`differ`
    recovers it, so the tau estimated is the excess over the same se the comparison adds it to)."""
    out = {}
    for t in data.get("tasks") or []:
        s, lo, hi = t.get("speedup"), t.get("speedup_ci_low"), t.get("speedup_ci_high")
        if not s or not lo or not hi or min(s, lo, hi) <= 0 or t.get("untimeable"):
            continue
        out[t["task_id"]] = (math.log(s), log_se(lo, hi, confidence))
    return out


def points_from_records(records: pl.DataFrame, confidence: float = 0.95) -> dict[str, tuple[float, float]]:
    """Group key ``task_id@method/sample_id/sha256[:12]`` -> ``(ln speedup, se)`` of each usable speedup
    (:func:`kit.results.rules.scorable_speedup`) with a finite interval in one evaluation run's deduplicated
    ``records``: the same candidate evaluated in separate runs (a run and its reproductions, a config evaluated
    twice) gives that candidate's between-run points; ``se`` recovered from the interval (:func:`log_se`)."""
    rows = scoring.scorable_rows(records).select(
        "task_id", "method", "sample_id", "candidate_sha256", "speedup", "speedup_ci_low", "speedup_ci_high")
    out = {}
    for tid, method, sample, sha, s, lo, hi in rows.iter_rows():
        if lo is None or hi is None or not (0 < lo <= hi) or not math.isfinite(hi):
            continue
        out[f"{tid}@{method}/{sample}/{(sha or '')[:12]}"] = (math.log(s), log_se(lo, hi, confidence))
    return out


def points_from_rounds(round_ms: Iterable[float]) -> tuple[float, float] | None:
    """``(mean ln, se)`` of one run's round medians ``round_ms`` (ms) of a task: the run's log time and the
    standard error of that mean over its rounds; None with fewer than 2 positive rounds."""
    logs = [math.log(x) for x in round_ms if x is not None and x > 0]
    if len(logs) < 2:
        return None
    m = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - m) ** 2 for x in logs) / (len(logs) - 1))
    return m, sd / math.sqrt(len(logs))


def estimate_line(est: Mapping) -> str:
    """:func:`estimate`'s figures in one sentence, for the console."""
    p = est.get("pooled")
    if not p:
        return "between runs: no task was timed in 2 or more runs, no estimate"
    return (f"between runs: sd of ln speedup {p['log_sd']:.4f} ({100 * math.expm1(p['log_sd']):.1f} %; "
            f"DerSimonian-Laird {p['log_sd_raw']:.4f} before the {FLOOR_LOG_SD:g} floor) over {p['tasks']} tasks of "
            f"up to {p['runs']} runs ({p['df']} degrees of freedom); {len(est.get('tasks') or {})} tasks with "
            f">= {MIN_TASK_RUNS} runs have their own figure (at least the pooled one)")


def z_of(confidence: float) -> float:
    """The two-sided normal quantile of ``confidence`` (1.96 for 0.95)."""
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def log_se(low: float, high: float, confidence: float = 0.95) -> float:
    """The standard error of ln(speedup) recovered from its interval ``[low, high]`` (module docstring)."""
    return math.log(high / low) / (2 * z_of(confidence)) if low > 0 and high > 0 else 0.0


def differ(a: tuple[float, float, float], b: tuple[float, float, float], tau: float,
           confidence: float = 0.95) -> bool:
    """Whether speedups ``a`` and ``b`` (each ``(value, ci_low, ci_high)``) of separate runs differ beyond both
    runs' intervals and the between-run sd ``tau`` (log scale; module docstring)."""
    se2 = log_se(a[1], a[2], confidence) ** 2 + log_se(b[1], b[2], confidence) ** 2
    return abs(math.log(b[0] / a[0])) > z_of(confidence) * math.sqrt(se2 + 2 * tau * tau)


def detectable_change(a: tuple[float, float, float], b: tuple[float, float, float], tau: float,
                      confidence: float = 0.95) -> float:
    """The smallest relative change of speedup ``b`` (``(value, ci_low, ci_high)``) against ``a`` that a comparison
    of the two across runs calls different: 0.2 for a kernel made 20 % slower or faster (time x 1.2: speedup /
    1.2).  A difference needs both the intervals apart (the sum of their half-widths on the log scale) and
    :func:`differ`'s ``z sqrt(se1^2 + se2^2 + 2 tau^2)``, with ``b``'s interval kept as wide as it is; returns
    ``exp(max of the two) - 1``."""
    half = (math.log(a[2] / a[1]) + math.log(b[2] / b[1])) / 2
    se2 = log_se(a[1], a[2], confidence) ** 2 + log_se(b[1], b[2], confidence) ** 2
    return math.expm1(max(half, z_of(confidence) * math.sqrt(se2 + 2 * tau * tau)))


def from_calibration(data: Mapping | None, task_id: str | None, source: str) -> Tau | None:
    """The :class:`Tau` of ``task_id`` stored in a calibration file's content ``data`` (``between_run``: its
    per-task entry, else the pooled one); None when ``data`` has no estimate (an older file)."""
    br = (data or {}).get("between_run") if isinstance(data, Mapping) else None
    if not isinstance(br, Mapping):
        return None
    t = (br.get("tasks") or {}).get(task_id) if task_id is not None else None
    if isinstance(t, Mapping) and isinstance(t.get("log_sd"), int | float):
        return Tau(float(t["log_sd"]), source, int(t.get("runs") or 0), "task")
    p = br.get("pooled")
    if isinstance(p, Mapping) and isinstance(p.get("log_sd"), int | float):
        return Tau(float(p["log_sd"]), source, int(p.get("runs") or 0), "pooled")
    return None


def default_tau(why: str = "no between-run estimate for this host, see mkb calibrate --between-runs") -> Tau:
    """:data:`DEFAULT_LOG_SD`, saying why it is used."""
    return Tau(DEFAULT_LOG_SD, why, 0, "default")
