"""A checked forward's inputs as the kit vouches for them: rebuilt from the timed input sets the kit generated
itself at the pool indices the kit's runner drew them at (``runner/mkb_fresh.hpp``), or, where a runner wrote the
inputs themselves (the fixture engine's), checked against those sets.

The runner derives every fresh input from the timed sets it was given, per tensor a sample without replacement of
their values; its copy of the sets lives in its address space, where the candidate's code runs, so a kernel can
zero them (issue 26: every later input zeros, zeros out correct, and the checked forwards, compared with ONNX
Runtime on the inputs the runner wrote out, passed).  So the kit's runner writes no inputs, only, per tensor, the
pool index of every unit it drew (:data:`UNIT_ELEMENTS` elements for tensors of more than
:data:`ELEMENTWISE_UP_TO` elements, then the elements after the last full unit one by one; single elements
below): :meth:`Pool.take` rebuilds the input from the kit's sets, provided the indices are distinct and in range
(a sample without replacement), and the forward's outputs are compared on that.  Indices the candidate edited
can only name another sample, whose outputs the kernel must then have computed.

Inputs a runner wrote out are vouched for by this rule (:func:`forged`):

    per input tensor, the multiset of its 4-byte words (bit patterns: float32 and int32 alike, so -0.0, NaN
    payloads and 0.0 are told apart) is contained in the multiset union of that tensor's words over the timed
    sets: no word occurs in it more often than in all the sets together.

A sample without replacement meets it whatever the runner samples.  For a large tensor the kit first tries the
stronger unit form (every 256-byte unit one of the sets' units, as often at most, and the trailing elements among
the sets' trailing elements; a sort key per unit, then a whole comparison), and checks the elements only where
that fails.  What neither form sees: an input whose values are all the sets' (a shuffle of the pool, the pool's
values moved between forwards); and for a tensor of few distinct values (bool, small integer domains) the rule
bounds only how often each occurs.

Cost (what is sorted is sorted once per timing stage, when first needed): see docs/untrusted.md.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import numpy as np

#: the runner's unit of a large tensor's sample, in elements, and the largest tensor it samples element by element
#: (``kUnitElements``, ``kElementwiseUpTo`` of ``runner/mkb_fresh.hpp``)
UNIT_ELEMENTS = 64
ELEMENTWISE_UP_TO = 1 << 16


def _words(a: np.ndarray) -> np.ndarray:
    """The 4-byte words of a float32/int32 array, flat (uint32).

    Raises:
        ValueError: another item size."""
    a = np.ascontiguousarray(a)
    if a.dtype.itemsize != 4:
        raise ValueError(f"a wire tensor has 4-byte elements, not {a.dtype}")
    return a.reshape(-1).view(np.uint32)


def _units(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The full units of ``words`` (rows of :data:`UNIT_ELEMENTS` words) and the words after the last of them."""
    cut = words.size // UNIT_ELEMENTS * UNIT_ELEMENTS
    return words[:cut].reshape(-1, UNIT_ELEMENTS), words[cut:]


#: odd 64-bit multipliers of a unit's first eight 8-byte words in its sort key (:func:`_keys`)
_MIX = np.array([0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB, 0xD6E8FEB86659FD93,
                 0xA0761D6478BD642F, 0xE7037ED1A0B428DB, 0x8EBC6AF09C88C6E3, 0x589965CC75374CC3], dtype=np.uint64)


def _keys(units: np.ndarray) -> np.ndarray:
    """A 64-bit key per unit (rows of :data:`UNIT_ELEMENTS` uint32 words): the sum of its first eight 8-byte words
    times :data:`_MIX`, modulo 2**64.  Units with equal keys need not be equal: :class:`_Units` compares them
    whole."""
    # einsum: the same sums of products modulo 2**64 without the (n, 8) temporary (a third of the time)
    return np.einsum("ij,j->i", np.ascontiguousarray(units).view(np.uint64)[:, :_MIX.size], _MIX)


class _Units:
    """The sets' units sorted by key (:func:`_keys`), for the unit form of the rule; ``runs[i]``: how many of
    them share the key of unit ``i`` from ``i`` on."""

    def __init__(self, units: np.ndarray) -> None:
        keys = _keys(units)
        order = np.argsort(keys, kind="stable")
        self.keys, self.units = keys[order], units[order]
        starts = np.flatnonzero(np.r_[True, self.keys[1:] != self.keys[:-1], True])
        self.runs = np.zeros(self.keys.size, dtype=np.int64)
        self.runs[starts[:-1]] = np.diff(starts)

    def holds(self, units: np.ndarray) -> bool:
        """Whether every unit of ``units`` is, whole, the first of the sets' units with its key, and no key occurs
        more often in ``units`` than among the sets' units.  True implies the elements' containment; False may
        also mean two of the sets' units share a key, so the caller then checks the elements."""
        keys = _keys(units)
        order = np.argsort(keys)  # sorted queries: a binary search that stays in the cache (3-6x faster)
        at = np.empty_like(order)
        at[order] = np.searchsorted(self.keys, keys[order])  # in the queries' order: no sorted copy of the units
        if np.any(at >= self.keys.size) or not np.array_equal(self.units[at], units):
            return False
        return bool(np.all(np.bincount(at, minlength=self.keys.size)[at] <= self.runs[at]))


def _counts(items: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct items of sorted ``items`` and how often each occurs."""
    edge = np.ones(items.size + 1, dtype=bool)
    np.not_equal(items[1:], items[:-1], out=edge[1:-1])
    at = np.flatnonzero(edge)
    return items[at[:-1]], np.diff(at)


class _Multiset:
    """Sorted uint32 words and their distinct values' counts."""

    def __init__(self, items: np.ndarray) -> None:
        self.sorted = np.sort(items)
        self.distinct, self.counts = _counts(self.sorted)

    def holds(self, items: np.ndarray) -> bool:
        """Whether ``items`` is contained in this multiset: sorted together, the two have the same distinct items
        (no new one) and each occurs at most twice as often as here (at most as often in ``items``)."""
        both = np.concatenate([self.sorted, items])
        both.sort()
        distinct, counts = _counts(both)
        return distinct.size == self.distinct.size and bool(np.all(counts <= 2 * self.counts))


class Pool:
    """One input tensor's values over the timed sets (wire arrays of one shape, float32 or int32), ready to
    rebuild a draw from (:meth:`take`) or check a drawn tensor against (:meth:`excess`; what it sorts is sorted
    once, when first needed)."""

    def __init__(self, sets: Sequence[np.ndarray]) -> None:
        words = [_words(s) for s in sets]
        self._words = np.concatenate(words)
        self.size, self.sets = words[0].size, len(words)
        self.shape, self.dtype = np.shape(sets[0]), np.asarray(sets[0]).dtype
        #: drawn by the runner's units of :data:`UNIT_ELEMENTS` elements (else element by element)
        self.by_units = self.size > ELEMENTWISE_UP_TO

    @functools.cached_property
    def units(self) -> tuple[_Units, _Multiset]:
        """The sets' units sorted by key and the words after their last full units (the unit form of the rule)."""
        rows, rest = self._rows
        return _Units(rows), _Multiset(rest)

    @functools.cached_property
    def _rows(self) -> tuple[np.ndarray, np.ndarray]:
        """The sets' units in pool order (row ``k * units + u``: unit ``u`` of set ``k``; single elements for a
        tensor of at most :data:`ELEMENTWISE_UP_TO`) and the words after each set's last full unit (``k * rest +
        e``): what the runner's draw indices point at (``runner/mkb_fresh.hpp`` ``FreshInputs::drawn``)."""
        sets = self._words.reshape(self.sets, self.size)  # not (-1, size): a tensor may have no elements
        if not self.by_units:
            return sets.reshape(-1, 1), sets[:, :0].reshape(-1)
        parts = [_units(w) for w in sets]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def take(self, draw: np.ndarray) -> np.ndarray | None:
        """The tensor the runner drew at the pool indices ``draw`` (its word for a checked forward: int32, one per
        unit, then one per element after the last full unit; ``runner/mkb_fresh.hpp`` ``FreshInputs::drawn``),
        rebuilt from the kit's own sets: a wire array of the sets' shape and dtype; None when ``draw`` is no
        sample without replacement (another size, not 4-byte integers, an index repeated or beyond the pool).
        Cost for 1 M elements from 2 sets: about 1.2 ms (a gather), against 10 ms for checking a written input by
        sorting."""
        rows, rest = self._rows
        units = rows.shape[0] // self.sets  # drawn per tensor; then rest.size // self.sets single elements
        idx = np.ascontiguousarray(draw).reshape(-1)
        if idx.dtype not in (np.int32, np.uint32) or idx.size != units + rest.size // self.sets:
            return None
        head, back = idx[:units].view(np.uint32), idx[units:].view(np.uint32)
        for at, pool in ((head, rows), (back, rest)):
            if at.size and (int(at.max()) >= pool.shape[0] or np.bincount(at, minlength=pool.shape[0]).max() > 1):
                return None
        got = np.take(rows, head, axis=0).reshape(-1)  # np.take: a sixth of fancy indexing's time here
        if back.size:
            got = np.concatenate([got, np.take(rest, back)])
        return got.view(self.dtype).reshape(self.shape)

    @functools.cached_property
    def elements(self) -> _Multiset:
        """The sets' words as a multiset (sorted when first needed: a large tensor's units mostly decide)."""
        return _Multiset(self._words)

    def excess(self, drawn: np.ndarray) -> int:
        """How many of ``drawn``'s elements (a wire array of the sets' size) the sets cannot have given: the count
        of its words beyond the sets' own count of each, summed; 0 for a sample of the sets' values.

        Raises:
            ValueError: ``drawn`` has another size or item size than the sets."""
        words = _words(drawn)
        if words.size != self.size:
            raise ValueError(f"{words.size} elements drawn from sets of {self.size}")
        if self.by_units:
            units, rest = _units(words)
            if self.units[0].holds(units) and self.units[1].holds(rest):
                return 0
        if self.elements.holds(words):
            return 0
        distinct, counts = _counts(np.sort(words))
        at = np.minimum(np.searchsorted(self.elements.distinct, distinct), self.elements.distinct.size - 1)
        have = np.where(self.elements.distinct[at] == distinct, self.elements.counts[at], 0)
        return int(np.maximum(counts - have, 0).sum())


def pools(sets: Sequence[Mapping[str, np.ndarray]]) -> dict[str, Pool]:
    """Per input tensor (name), the :class:`Pool` of ``sets`` (the timed sets in wire form, each name → array;
    none: no pool)."""
    return {name: Pool([s[name] for s in sets]) for name in sets[0]} if sets else {}


def forged(drawn: Mapping[str, np.ndarray], pools_: Mapping[str, Pool]) -> list[str]:
    """Why the tensors of one checked forward's inputs (``drawn``: name → wire array) cannot have been drawn from
    the timed sets (``pools_``, :func:`pools`): one reason per tensor that breaks the rule (module docstring),
    naming it and how many of its values are not the sets'; empty when every tensor keeps it.

    Raises:
        KeyError: a tensor of ``pools_`` is missing from ``drawn``; ValueError: one has another size."""
    reasons = []
    for name, pool in pools_.items():
        extra = pool.excess(drawn[name])
        if extra:
            reasons.append(f"input {name!r}: {extra} of its {pool.size} values are not drawn from the timed sets "
                           "(more often than in both sets together, or in neither)")
    return reasons


def rebuilt(draw: Mapping[str, np.ndarray], pools_: Mapping[str, Pool]) -> tuple[dict[str, np.ndarray], list[str]]:
    """A checked forward's inputs rebuilt from the runner's pool indices (``draw``: name → int32 array, the kit's
    runner) and the kit's own sets (``pools_``), each in the sets' wire shape, and why a tensor could not be (its
    indices missing, repeated or beyond the pool: the runner's memory was edited): (inputs, reasons)."""
    inputs, reasons = {}, []
    for name, pool in pools_.items():
        got = pool.take(draw[name]) if name in draw else None
        if got is None:
            reasons.append(f"input {name!r}: the pool indices the runner wrote are no sample without replacement of "
                           "the timed sets (missing, repeated or beyond them)")
        else:
            inputs[name] = got
    return inputs, reasons
