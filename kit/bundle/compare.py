"""A reproduction against its bundle: per candidate, per task and per metric, each outcome ``same``,
``within noise`` or ``different``.

Rules (issue 17):

* **Compile and correctness** must match exactly, per candidate (method, task, sample): the compile outcome is
  ``built`` for a status in :data:`kit.results.records.COMPILED`, else the status; correctness is ``correct`` for a
  status in :data:`kit.results.records.CORRECT`, else the status (``not built`` before a build).  A candidate recorded
  on one side only is a difference.
* **Speedups** (only a usable one, :func:`kit.results.rules.scorable_speedup`) must agree within their intervals:
  ``same`` when each lies inside the other's interval, ``within noise`` when the intervals overlap or the two
  are within both runs' errors and the between-run component ``tau`` (:func:`kit.score.betweenrun.differ`:
  ``|ln s1 - ln s2| <= z sqrt(se1^2 + se2^2 + 2 tau^2)``; the intervals are over one run's rounds, what moves
  between runs is not in them), else ``different``; a usable speedup on one side only is a difference.  ``tau``
  per task comes from the caller (:func:`kit.baselines.between.resolver`); without one,
  :func:`kit.score.betweenrun.default_tau`.  Each compared row keeps ``detectable_change``, the smallest
  relative change these two intervals and that ``tau`` would call different
  (:func:`kit.score.betweenrun.detectable_change`).  The task's A/A noise band is no part of it: that band is one A/A
  run's own interval (a within-run figure, as wide as that run's rounds made it), which both sides' intervals
  measure for these runs themselves; what a run adds is ``tau``.
* **fast_p** of a task may differ only inside the noise band: a task that counts for ``fast_p`` on one side
  and not on the other is ``within noise`` when its best speedups agree (the rule above), else ``different``.
  A metric (CSR, FCR, each fast_p per method, :func:`kit.score.metrics.summary`) is ``same`` when equal; a fast_p
  that differs only by such tasks is ``within noise``.
* **Other hardware** (a fingerprint key of :data:`kit.host.machine.HARDWARE_KEYS` differs): speedups and fast_p
  are ``not compared``; compile and correctness must still match.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from kit.results import rules as scoring
from kit.results.records import COMPILED, CORRECT
from kit.results.rules import Speedup
from kit.score import betweenrun, metrics
from kit.score.betweenrun import Tau

SAME, NOISE, DIFFERENT = "same", "within noise", "different"
NA, SKIPPED = "n/a", "not compared"
#: how bad a verdict is, for :func:`worst` (nothing to compare < not compared < same < within noise < different)
_RANK = {NA: 0, SKIPPED: 1, SAME: 2, NOISE: 3, DIFFERENT: 4}
_COMPILED = {s.value for s in COMPILED}
_CORRECT = {s.value for s in CORRECT}
KEY = ("method", "task_id", "sample_id")
#: how many speedups :meth:`BundleComparison.detectable` names
SHOWN = 5


def worst(verdicts: list[str]) -> str:
    """The worst of ``verdicts`` (``different`` > ``within noise`` > ``same`` > ``not compared`` > ``n/a``);
    ``n/a`` for none."""
    return max(verdicts, key=lambda v: _RANK[v], default=NA)


def speedup_verdict(a: Speedup, b: Speedup, tau: float = 0.0, confidence: float = 0.95) -> str:
    """``same`` / ``within noise`` / ``different`` for two speedups of one candidate or task from separate runs
    (module rules); ``tau`` the between-run sd of ln speedup, ``confidence`` the intervals' level."""
    if a.low <= b.value <= a.high and b.low <= a.value <= b.high:
        return SAME
    if max(a.low, b.low) <= min(a.high, b.high):
        return NOISE
    if not betweenrun.differ(a, b, tau, confidence):
        return NOISE
    return DIFFERENT


#: a task id -> the between-run sd to use for it (:class:`kit.score.betweenrun.Tau`)
TauOf = Callable[[str], Tau]


@dataclass(frozen=True)
class Between:
    """How speedups of separate runs are compared: ``tau_of`` gives each task's between-run sd, ``confidence``
    is the intervals' level."""

    tau_of: TauOf = field(default=lambda _t: betweenrun.default_tau())
    confidence: float = 0.95


@dataclass
class BundleComparison:
    """The verdicts: ``candidates`` and ``tasks`` rows (dicts; the keys :mod:`kit.bundle.verdict` prints),
    ``metrics`` rows (``method``, ``metric``, ``bundle``, ``reproduced``, ``verdict``) and ``differences``,
    one sentence per real difference (what makes ``mkb reproduce`` exit 1)."""

    same_hardware: bool
    between: Between = field(default_factory=Between)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)

    @property
    def matches(self) -> bool:
        return not self.differences

    def verdict(self, a: Speedup, b: Speedup, task_id: str) -> str:
        """:func:`speedup_verdict` of task ``task_id``'s speedups with its between-run sd."""
        return speedup_verdict(a, b, self.tau_of(task_id).log_sd, self.between.confidence)

    def tau_of(self, task_id: str) -> Tau:
        return self.between.tau_of(task_id)

    def detectable(self, change: float = 0.2) -> str | None:
        """One sentence: for how many compared speedups a change of ``change`` (0.2: a kernel made 20 % slower)
        would be called different, naming those it would not be with the change each needs (the rows'
        ``detectable_change``; the :data:`SHOWN` that need most, then how many more); None when no speedup was
        compared."""
        rows = [r for r in self.candidates if r.get("detectable_change") is not None]
        if not rows:
            return None
        blind = sorted((r for r in rows if r["detectable_change"] > change), key=lambda r: -r["detectable_change"])
        text = (f"a speedup changed by {100 * change:.0f} % would be called different for {len(rows) - len(blind)} of "
                f"{len(rows)} compared")
        named = [f"{'/'.join((r['method'], r['task_id'], r['sample_id']))} (needs {100 * r['detectable_change']:.0f} %)"
                 for r in blind[:SHOWN]]
        if blind:
            text += "; not for " + ", ".join(named) + (f" and {len(blind) - SHOWN} more" if len(blind) > SHOWN else "")
        return text

    def taus_used(self) -> list[str]:
        """Each distinct between-run sd the speedup rows used, in words (:meth:`kit.score.betweenrun.Tau.text`)
        with the tasks it served: what ``mkb reproduce`` prints."""
        by: dict[str, list[str]] = {}
        for r in self.candidates:
            if r.get("speedup") in (SAME, NOISE, DIFFERENT) and r.get("speedup_bundle") and r.get("speedup_reproduced"):
                by.setdefault(self.tau_of(r["task_id"]).text(), []).append(r["task_id"])
        return [f"{text}: {len(set(ts))} task(s)" for text, ts in by.items()]


def _outcomes(status: str | None) -> tuple[str, str]:
    if status is None:
        return "no record", "no record"
    if status not in _COMPILED:
        return status, "not built"
    return "built", "correct" if status in _CORRECT else status


def compare(bundle: pl.DataFrame, reproduced: pl.DataFrame, tasks: pl.DataFrame, ps: list[float],
            noise: dict[str, float] | None = None, same_hardware: bool = True,
            between: Between | None = None) -> BundleComparison:
    """Compare the reproduced records with the bundle's (both deduplicated, :data:`kit.results.shards.SHARD_SCHEMA`)
    over the bundle's denominator ``tasks`` and thresholds ``ps`` (module rules); ``between`` gives each task's
    between-run sd (None: :func:`kit.score.betweenrun.default_tau` for all) and the intervals' level."""
    out = BundleComparison(same_hardware, between or Between())
    noise = noise or {}
    sa, sb = scoring.candidate_speedups(bundle), scoring.candidate_speedups(reproduced)
    status_a = {k[:3]: k[3] for k in bundle.select(*KEY, "status").iter_rows()}
    status_b = {k[:3]: k[3] for k in reproduced.select(*KEY, "status").iter_rows()}
    for key in sorted(set(status_a) | set(status_b)):
        out.candidates.append(_candidate(out, key, (status_a.get(key), status_b.get(key)), (sa.get(key), sb.get(key))))
    flips = _task_rows(out, bundle, reproduced, tasks, ps, noise)
    _metric_rows(out, bundle, reproduced, tasks, ps, noise, flips)
    return out


def _candidate(cmp: BundleComparison, key: tuple[str, str, str], statuses: tuple[str | None, str | None],
               speedups: tuple[Speedup | None, Speedup | None]) -> dict[str, Any]:
    """The row of one candidate ``key`` (method, task, sample) from its (bundle, reproduced) ``statuses`` and usable
    ``speedups``; a real difference goes to ``cmp.differences``."""
    (a, b), (sa, sb), same_hw, differences = statuses, speedups, cmp.same_hardware, cmp.differences
    name = "/".join(key)
    (ca, ra), (cb, rb) = _outcomes(a), _outcomes(b)
    row = {"method": key[0], "task_id": key[1], "sample_id": key[2], "bundle_status": a, "reproduced_status": b,
           "compile": SAME if ca == cb else DIFFERENT, "correct": SAME if ra == rb else DIFFERENT,
           "speedup_bundle": sa, "speedup_reproduced": sb}
    if ca != cb:
        differences.append(f"{name}: compile outcome {ca} in the bundle, {cb} in the reproduction")
    elif ra != rb:
        differences.append(f"{name}: correctness {ra} in the bundle, {rb} in the reproduction")
    if ra != rb or (sa is None and sb is None):
        row["speedup"] = NA
    elif not same_hw:
        row["speedup"] = SKIPPED
    elif sa is None or sb is None:
        row["speedup"] = DIFFERENT
        differences.append(f"{name}: a usable speedup only in the {'bundle' if sb is None else 'reproduction'} "
                           f"({(sa or sb).text()}; statuses {a} / {b})")  # type: ignore[union-attr]
    else:
        row["speedup"] = cmp.verdict(sa, sb, key[1])
        row["tau_log_sd"] = cmp.tau_of(key[1]).log_sd
        row["detectable_change"] = betweenrun.detectable_change(sa, sb, row["tau_log_sd"],
                                                                cmp.between.confidence)
        if row["speedup"] == DIFFERENT:
            differences.append(f"{name}: speedup {sa.text()} in the bundle, {sb.text()} in the reproduction "
                               f"({cmp.tau_of(key[1]).text()})")
    return row


def _task_rows(out: BundleComparison, a: pl.DataFrame, b: pl.DataFrame, tasks: pl.DataFrame, ps: list[float],
               noise: dict[str, float]) -> dict[tuple[str, float], list[tuple[str, str]]]:
    """Fill ``out.tasks``; return, per (method, p), the tasks whose fast_p differs with their verdict."""
    pa, pb = (metrics.per_task(x, tasks, ("method",), noise or None) for x in (a, b))
    best_a, best_b = scoring.best_speedups(a), scoring.best_speedups(b)
    fast = {}
    for name, pt in (("a", pa), ("b", pb)):
        counted = pt.filter(pl.col("correct") & ~pl.col("no_native") & pl.col("speedup").is_not_null())
        fast[name] = {(m, t): s for m, t, s in counted.select("method", "task_id", "speedup").iter_rows()}
    flips: dict[tuple[str, float], list[tuple[str, str]]] = {}
    by_task: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in out.candidates:
        by_task.setdefault((row["method"], row["task_id"]), []).append(row)
    keys = sorted(set(pa.select("method", "task_id").iter_rows()) | set(pb.select("method", "task_id").iter_rows()))
    for key in keys:
        rows = by_task.get(key, [])
        x, y = best_a.get(key), best_b.get(key)
        agree = x is not None and y is not None and out.verdict(x, y, key[1]) != DIFFERENT
        fast_verdicts = []
        for p in ps:
            fa, fb = fast["a"].get(key, 0) > p, fast["b"].get(key, 0) > p
            if fa == fb:
                continue
            v = SKIPPED if not out.same_hardware else (NOISE if agree else DIFFERENT)
            flips.setdefault((key[0], p), []).append((key[1], v))
            fast_verdicts.append(v)
        out.tasks.append({"method": key[0], "task_id": key[1], "samples": len(rows),
                          "compile": worst([r["compile"] for r in rows]), "correct": worst([r["correct"] for r in rows]),
                          "speedup": worst([r["speedup"] for r in rows]), "best_bundle": x, "best_reproduced": y,
                          "fast_p": worst(fast_verdicts) if fast_verdicts else SAME})
    return flips


def _metric_rows(out: BundleComparison, a: pl.DataFrame, b: pl.DataFrame, tasks: pl.DataFrame, ps: list[float],
                 noise: dict[str, float], flips: dict[tuple[str, float], list[tuple[str, str]]]) -> None:
    sa, sb = ({r["method"]: r for r in metrics.summary(x, tasks, ps=ps, boot=metrics.Bootstrap(n=1), noise=noise or None).iter_rows(
        named=True)} for x in (a, b))
    for method in sorted(set(sa) | set(sb)):
        for metric in ("csr", "fcr", *(metrics.fast_col(p) for p in ps)):
            va, vb = (s.get(method, {}).get(metric) for s in (sa, sb))
            if va is not None and vb is not None and math.isclose(va, vb, abs_tol=1e-12):
                verdict = SAME
            elif metric in ("csr", "fcr") or va is None or vb is None:
                verdict = DIFFERENT
            else:
                p = ps[[metrics.fast_col(q) for q in ps].index(metric)]
                found = [v for _t, v in flips.get((method, p), [])]
                verdict = SKIPPED if not out.same_hardware else (worst(found) if found else DIFFERENT)
            out.metrics.append({"method": method, "metric": metric, "bundle": va, "reproduced": vb, "verdict": verdict})
            if verdict == DIFFERENT:
                shown = "n/a" if va is None or vb is None else f"{va:.3f} -> {vb:.3f}"
                out.differences.append(f"{method}: {metric} {shown}")
