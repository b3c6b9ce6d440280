"""Whether an input the runner wrote out can be one of its fresh inputs (``runner/mkb_fresh.hpp``), checked by the
kit against the input sets it generated itself.

The runner derives every fresh input from the timed sets it was given, per tensor a sample without replacement of
their values; its copy of the sets lives in its address space, where the candidate's code runs, so a kernel can
zero them (issue 26: every later input zeros, zeros out correct, and the checked forwards, compared with ONNX
Runtime on the inputs the runner wrote out, passed).  The kit vouches for a checked forward's inputs by this rule:

    per input tensor, the multiset of its 4-byte words (bit patterns: float32 and int32 alike, so -0.0, NaN
    payloads and 0.0 are told apart) is contained in the multiset union of that tensor's words over the timed
    sets: no word occurs in it more often than in all the sets together.

A sample without replacement meets it whatever the runner samples: the kit's runner moves whole units of
:data:`UNIT_ELEMENTS` elements for tensors of more than :data:`ELEMENTWISE_UP_TO` elements (and the elements
after the last full unit one by one), the fixture engine's runner single elements at every size.  For a large
tensor the kit first tries the stronger unit form (every 64-byte unit one of the sets' units, as often at most,
and the trailing elements among the sets' trailing elements), which the kit's runner meets and which is several
times faster (a sort key per unit, then a whole comparison), and checks the elements only where that fails.  What it cannot see: a forged input whose
values are all the sets' (a shuffle of the pool, the pool's values moved between forwards); and for a tensor of
few distinct values (bool, small integer domains) the rule bounds only how often each occurs.

Cost (the sort of the sets' words is made once per timing stage): see docs/untrusted.md.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import numpy as np

#: the runner's unit of a large tensor's sample, in elements, and the largest tensor it samples element by element
#: (``kUnitElements``, ``kElementwiseUpTo`` of ``runner/mkb_fresh.hpp``)
UNIT_ELEMENTS = 16
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


#: odd 64-bit multipliers of a unit's eight 8-byte words in its sort key (:func:`_keys`)
_MIX = np.array([0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB, 0xD6E8FEB86659FD93,
                 0xA0761D6478BD642F, 0xE7037ED1A0B428DB, 0x8EBC6AF09C88C6E3, 0x589965CC75374CC3], dtype=np.uint64)


def _keys(units: np.ndarray) -> np.ndarray:
    """A 64-bit key per unit (rows of 16 uint32 words): the sum of its 8-byte words times :data:`_MIX`, modulo
    2**64.  Units with equal keys need not be equal: :class:`_Units` compares them whole."""
    # einsum: the same sums of products modulo 2**64 without the (n, 8) temporary (a third of the time)
    return np.einsum("ij,j->i", np.ascontiguousarray(units).view(np.uint64), _MIX)


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
    check drawn tensors against (:meth:`excess`)."""

    def __init__(self, sets: Sequence[np.ndarray]) -> None:
        words = [_words(s) for s in sets]
        self._words = np.concatenate(words)
        self.size = words[0].size
        self.units: tuple[_Units, _Multiset] | None = None
        if self.size > ELEMENTWISE_UP_TO:
            parts = [_units(w) for w in words]
            self.units = (_Units(np.concatenate([p[0] for p in parts])),
                          _Multiset(np.concatenate([p[1] for p in parts])))
        else:
            _ = self.elements  # always needed: sorted now, once per timing stage

    @functools.cached_property
    def _rows(self) -> tuple[np.ndarray, np.ndarray]:
        """The sets' units in pool order (row ``k * units + u``: unit ``u`` of set ``k``; single elements for a
        tensor of at most :data:`ELEMENTWISE_UP_TO`) and the words after each set's last full unit (``k * rest +
        e``): what the runner's draw indices point at (``runner/mkb_fresh.hpp`` ``FreshInputs::drawn``)."""
        sets = self._words.reshape(-1, self.size)
        if self.units is None:
            return sets.reshape(-1, 1), sets[:, :0].reshape(-1)
        parts = [_units(w) for w in sets]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def drawn_by(self, drawn: np.ndarray, draw: np.ndarray) -> bool:
        """Whether ``drawn`` (a wire array of the sets' size) is the sets' units at the distinct pool indices
        ``draw`` (the runner's word for how it drew them: int32, one per unit, then one per element after the
        last full unit), in that order: then it is a sample without replacement and keeps the rule.  False
        decides nothing (indices the candidate edited, or none written): :meth:`excess` then checks by sorting.
        Cost for 1 M elements from 2 sets: about 3 ms against 10 ms for the sort (a gather and a comparison)."""
        rows, rest = self._rows
        words = _words(drawn)
        units, tail = _units(words) if self.units is not None else (words.reshape(-1, 1), words[:0])
        idx = np.ascontiguousarray(draw).reshape(-1)
        if idx.dtype.itemsize != 4 or idx.size != units.shape[0] + tail.size or words.size != self.size:
            return False
        idx = idx.view(np.uint32)
        head, back = idx[:units.shape[0]], idx[units.shape[0]:]
        for at, pool, got in ((head, rows, units), (back, rest, tail)):
            if at.size and (int(at.max()) >= pool.shape[0] or np.bincount(at, minlength=pool.shape[0]).max() > 1
                            or not np.array_equal(pool[at], got)):
                return False
        return True

    @functools.cached_property
    def elements(self) -> _Multiset:
        """The sets' words as a multiset (sorted when first needed: a large tensor's units mostly decide)."""
        return _Multiset(self._words)

    def excess(self, drawn: np.ndarray, draw: np.ndarray | None = None) -> int:
        """How many of ``drawn``'s elements (a wire array of the sets' size) the sets cannot have given: the count
        of its words beyond the sets' own count of each, summed; 0 for a sample of the sets' values.  ``draw``:
        the runner's pool indices of its units, tried first (:meth:`drawn_by`).

        Raises:
            ValueError: ``drawn`` has another size or item size than the sets."""
        words = _words(drawn)
        if words.size != self.size:
            raise ValueError(f"{words.size} elements drawn from sets of {self.size}")
        if draw is not None and self.drawn_by(words, draw):
            return 0
        if self.units is not None:
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


def forged(drawn: Mapping[str, np.ndarray], pools_: Mapping[str, Pool],
           draw: Mapping[str, np.ndarray] | None = None) -> list[str]:
    """Why the tensors of one checked forward's inputs (``drawn``: name → wire array) cannot have been drawn from
    the timed sets (``pools_``, :func:`pools`): one reason per tensor that breaks the rule (module docstring),
    naming it and how many of its values are not the sets'; empty when every tensor keeps it.  ``draw``: the
    runner's pool indices per tensor (name → int32 array; None or a name missing: none), tried first.

    Raises:
        KeyError: a tensor of ``pools_`` is missing from ``drawn``; ValueError: one has another size."""
    reasons = []
    for name, pool in pools_.items():
        extra = pool.excess(drawn[name], (draw or {}).get(name))
        if extra:
            reasons.append(f"input {name!r}: {extra} of its {pool.size} values are not drawn from the timed sets "
                           "(more often than in both sets together, or in neither)")
    return reasons
