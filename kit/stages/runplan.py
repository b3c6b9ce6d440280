"""The plan of a timing's runs: the looks of an adaptive timing and the order of the runs of each batch.

A timing runs rounds in batches: ``rounds_min`` rounds, then ``rounds_step`` more at a time up to
``rounds_max``; after each batch (a *look*) it may stop (:mod:`kit.stages.sequential`).  The looks are fixed
before the first run, so the repeated confidence intervals that the stopping rule reads are those of a plan
made in advance.  ``rounds_min == rounds_max`` is the fixed protocol: one look, at the last round.  Within
each round both sides run once, the order alternating with the round's number (N C, C N, N C, ... counted
over the whole timing, so a batch that starts at an odd round starts with C N) to cancel order effects.
"""

from __future__ import annotations


def looks(rounds_min: int, rounds_step: int, rounds_max: int) -> tuple[int, ...]:
    """The rounds run by each look: ``rounds_min``, ``rounds_min + rounds_step``, ... and ``rounds_max`` last
    (a last step shorter than ``rounds_step`` where they do not meet).  ``(rounds_max,)`` when ``rounds_min >=
    rounds_max``.

    Raises:
        ValueError: ``rounds_max < 2`` or ``rounds_step < 1``."""
    if rounds_max < 2 or rounds_step < 1:
        raise ValueError(f"rounds_max {rounds_max} must be >= 2 and rounds_step {rounds_step} >= 1")
    if rounds_min >= rounds_max:
        return (rounds_max,)
    out = list(range(rounds_min, rounds_max, rounds_step))
    return (*out, rounds_max)


def batches(plan: tuple[int, ...]) -> list[range]:
    """The rounds each look adds, e.g. ``(6, 10)`` → ``[range(0, 6), range(6, 10)]``."""
    return [range(a, b) for a, b in zip((0, *plan[:-1]), plan)]


def run_order(rounds: range, with_native: bool) -> list[tuple[str, int]]:
    """(who, round) of every run of ``rounds``: native first in even rounds, candidate first in odd ones (only
    the candidate's runs without a native side)."""
    order = []
    for r in rounds:
        for who in (["native", "candidate"] if r % 2 == 0 else ["candidate", "native"]):
            if who == "candidate" or with_native:
                order.append((who, r))
    return order
