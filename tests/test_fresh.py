"""The kit's check that a checked forward's inputs can be the runner's fresh inputs (kit/mnn/fresh.py): a sample
without replacement of the timed sets' values, by elements or by the runner's units of ``fresh.UNIT_ELEMENTS``
elements, keeps the rule; zeros, a value used once too often, a value of neither set, or an input of another size
do not."""

from __future__ import annotations

import numpy as np
import pytest

from kit.bench.inputcheck import derive
from kit.mnn import fresh


def _sets(n: int, dtype=np.float32, seed: int = 0, high: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if high:
        return [rng.integers(0, high, n).astype(np.int32) for _ in range(2)]
    return [rng.uniform(-1, 1, n).astype(dtype) for _ in range(2)]


def _by_elements(sets: list[np.ndarray], seed: int = 1) -> np.ndarray:
    """As the fixture engine's runner: n of the 2n elements without replacement, in random order."""
    pool = np.concatenate(sets)
    return pool[np.random.default_rng(seed).permutation(pool.size)[:sets[0].size]]


def _by_units(sets: list[np.ndarray], seed: int = 1) -> np.ndarray:
    """As the kit's runner (mkb_fresh.hpp) for a large tensor: full units without replacement, the
    trailing elements one by one."""
    rng = np.random.default_rng(seed)
    n = sets[0].size
    cut = n // fresh.UNIT_ELEMENTS * fresh.UNIT_ELEMENTS
    units = np.concatenate([s[:cut].reshape(-1, fresh.UNIT_ELEMENTS) for s in sets])
    rest = np.concatenate([s[cut:] for s in sets])
    picked = units[rng.permutation(len(units))[:cut // fresh.UNIT_ELEMENTS]].reshape(-1)
    return np.concatenate([picked, rest[rng.permutation(rest.size)[:n - cut]]])


@pytest.mark.parametrize("n", [1, 7, 4096, fresh.ELEMENTWISE_UP_TO + 37, 132096])
def test_samples_of_the_sets_keep_the_rule(n):
    sets = _sets(n)
    pool = fresh.Pool(sets)
    assert pool.excess(_by_elements(sets)) == 0
    assert pool.excess(_by_units(sets)) == 0
    assert pool.excess(sets[1]) == 0  # a whole set is a sample too
    assert fresh.forged({"x": _by_units(sets)}, fresh.pools([{"x": s} for s in sets])) == []


@pytest.mark.parametrize("n", [7, 4096, 132096])
def test_zeros_and_values_of_neither_set_break_it(n):
    sets = _sets(n)
    pool = fresh.Pool(sets)
    assert pool.excess(np.zeros(n, np.float32)) == n
    drawn = _by_elements(sets)
    drawn[3] = np.float32(7.5)  # outside the distribution: in neither set
    assert pool.excess(drawn) == 1
    why = fresh.forged({"x": np.zeros(n, np.float32)}, fresh.pools([{"x": s} for s in sets]))
    assert len(why) == 1 and f"{n} of its {n} values are not drawn" in why[0]


def test_a_value_used_more_often_than_the_sets_hold_breaks_it():
    """Every value of the sets, but one of them twice where the sets hold it once (a sample *with* replacement);
    and -0.0 is not 0.0: the words are compared, not the numbers."""
    sets = _sets(4096)
    drawn = _by_elements(sets)
    drawn[1] = drawn[0]
    assert fresh.Pool(sets).excess(drawn) == 1
    zero = [np.zeros(8, np.float32), np.zeros(8, np.float32)]
    assert fresh.Pool(zero).excess(np.zeros(8, np.float32)) == 0
    assert fresh.Pool(zero).excess(np.full(8, -0.0, np.float32)) == 8


def test_small_integer_domains_bound_only_the_counts():
    """int32 values of a small domain (3 values): a sample keeps the rule; all zeros needs more zeros than the
    sets hold (about 2n/3 of 2n), so it breaks it by the difference."""
    n = 3000
    sets = _sets(n, high=3)
    pool = fresh.Pool(sets)
    assert pool.excess(_by_elements(sets)) == 0
    zeros_held = int(sum((s == 0).sum() for s in sets))
    assert pool.excess(np.zeros(n, np.int32)) == n - zeros_held


def test_another_size_or_item_size_is_an_error():
    pool = fresh.Pool(_sets(16))
    with pytest.raises(ValueError, match="elements drawn"):
        pool.excess(np.zeros(15, np.float32))
    with pytest.raises(ValueError, match="4-byte"):
        pool.excess(np.zeros(16, np.float64))


def test_the_unit_constants_are_the_runners():
    """kit/mnn/fresh.py mirrors kUnitElements and kElementwiseUpTo of the kit's runner."""
    from kit.mnn.runner_build import RUNNER_SOURCE

    text = (RUNNER_SOURCE.parent / "mkb_fresh.hpp").read_text()
    assert f"kUnitElements = {fresh.UNIT_ELEMENTS};" in text
    assert "kElementwiseUpTo = 1 << 16;" in text and fresh.ELEMENTWISE_UP_TO == 1 << 16


def test_units_that_repeat_in_the_sets_may_repeat_as_often():
    """A large tensor of 0s and 1s whose units are a few patterns has many equal units: a sample of the units
    keeps the rule (each unit at most as often as the sets hold it).  All zeros, no unit of the sets, is judged by
    the elements: the two sets hold about n zeros, so it keeps the rule or breaks it by the few it lacks (the
    rule's limit on a domain of few values)."""
    n, k = fresh.ELEMENTWISE_UP_TO + 4000, fresh.UNIT_ELEMENTS
    rng = np.random.default_rng(0)
    patterns = rng.integers(0, 2, (4, k)).astype(np.int32)
    sets = [np.concatenate([patterns[rng.integers(0, 4, n // k)].reshape(-1),
                            rng.integers(0, 2, n % k).astype(np.int32)]) for _ in range(2)]
    units = np.concatenate([s[: n // k * k].reshape(-1, k) for s in sets])
    assert len(np.unique(units, axis=0)) < len(units)  # equal units in the sets
    pool = fresh.Pool(sets)
    assert pool.excess(_by_units(sets)) == 0
    assert pool.excess(np.zeros(n, np.int32)) == max(0, n - int(sum((s == 0).sum() for s in sets)))


def _with_draw(sets: list[np.ndarray], seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """A sample as the kit's runner draws it and the pool indices it writes (the input-check benchmark's)."""
    return derive(sets, np.random.default_rng(seed))


@pytest.mark.parametrize("n", [7, 4096, fresh.ELEMENTWISE_UP_TO + 37, 132096])
def test_a_draw_is_rebuilt_from_the_kits_own_sets(n):
    sets = _sets(n)
    pool = fresh.Pool(sets)
    drawn, draw = _with_draw(sets)
    got = pool.take(draw)
    assert got is not None and got.dtype == np.float32 and np.array_equal(got.view(np.uint32), drawn.view(np.uint32))
    inputs, why = fresh.rebuilt({"x": draw}, fresh.pools([{"x": s.reshape(1, n)} for s in sets]))
    assert why == [] and inputs["x"].shape == (1, n) and np.array_equal(inputs["x"].ravel(), drawn)
    ints = _sets(n, high=50)
    assert fresh.Pool(ints).take(_with_draw(ints)[1]).dtype == np.int32


@pytest.mark.parametrize("n", [4096, fresh.ELEMENTWISE_UP_TO + 37])
def test_indices_that_are_no_sample_are_a_forgery(n):
    # the runner's memory is the candidate's to write: indices repeated, beyond the pool, of another length or
    # item size rebuild nothing, and the forward is named forged
    sets = _sets(n)
    pool = fresh.Pool(sets)
    _, draw = _with_draw(sets)
    twice = draw.copy()
    twice[1] = twice[0]
    beyond = draw.copy()
    beyond[-1] = 2 * n
    for bad in (twice, beyond, draw[:-1], np.concatenate([draw, draw[:1]]), draw.astype(np.int64), -draw - 1,
                draw.view(np.float32)):
        assert pool.take(bad) is None
    pools = fresh.pools([{"x": s} for s in sets])
    _, why = fresh.rebuilt({"x": twice}, pools)
    assert len(why) == 1 and "input 'x'" in why[0] and "no sample without replacement" in why[0]
    assert fresh.rebuilt({}, pools)[1]  # none written for a tensor
    # any other order of distinct indices is a sample: it names other values, which the outputs must then match
    swapped = draw.copy()
    swapped[[0, 1]] = swapped[[1, 0]]
    assert pool.take(swapped) is not None


def test_a_tensor_without_elements_is_its_own_sample():
    sets = [np.zeros(0, np.float32), np.zeros(0, np.float32)]
    pool = fresh.Pool(sets)
    assert pool.take(np.zeros(0, np.int32)).size == 0 and pool.excess(np.zeros(0, np.float32)) == 0
    assert pool.take(np.zeros(1, np.int32)) is None
