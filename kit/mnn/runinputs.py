"""The inputs of a runner call (:mod:`kit.mnn.runner`): one set or several, and input sets written once where every
run of a timing reads them (:func:`write_inputs`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kit.host import fstree
from kit.mnn import tensorio

#: the inputs of one call: one set (graph input name → array) or several, run in order in one process
Inputs = Mapping[str, np.ndarray] | Sequence[Mapping[str, np.ndarray]]


def reset_dir(path: Path) -> None:
    """``path`` emptied and made again (its files removed by :func:`kit.host.fstree.remove`)."""
    fstree.remove(path)  # the output directory of an earlier run: the candidate's code wrote there
    path.mkdir(parents=True)


def count_sets(inputs: Inputs) -> int | None:
    """How many sets ``inputs`` holds (None: a single set, a mapping)."""
    sets = input_sets(inputs)
    return None if sets is None else len(sets)


def input_sets(inputs: Inputs) -> list[Mapping[str, np.ndarray]] | None:
    """The sets of ``inputs`` (a sequence of mappings), or None for a single set (a mapping)."""
    if isinstance(inputs, Mapping):
        return None
    sets = list(inputs)
    if not sets or not all(isinstance(x, Mapping) for x in sets):
        raise ValueError("inputs must be a mapping (one set) or a non-empty sequence of mappings (sets)")
    return sets


@dataclass(frozen=True)
class WrittenInputs:
    """Input sets already written where the runner reads them (:func:`write_inputs`): ``dir`` is one set's tensor
    directory (``n_sets`` None) or holds ``n_sets`` sets in ``dir/<k>/``.  Runs given it share the directory: each
    sees it read-only (a sandbox's ``ro`` bind) and none rewrites it."""

    dir: Path
    n_sets: int | None


def write_inputs(inputs: Inputs, in_dir: Path) -> WrittenInputs:
    """Write ``inputs`` (as :func:`kit.mnn.runner.run_model` takes them; sent in their wire dtypes, :func:`kit.mnn.tensorio.to_wire`)
    into ``in_dir``, recreated, for every run that is given the result.  Why: the 20 runs of a timing read the same
    input sets; writing them once per timing, not per run, saved ~6 ms per MB of inputs per run.

    Raises:
        ValueError: ``inputs`` is neither a mapping nor a non-empty sequence of mappings;
        kit.mnn.tensorio.TensorIOError: a name or dtype without a wire form."""
    in_dir = Path(in_dir)
    sets = input_sets(inputs)
    reset_dir(in_dir)
    for k, one in enumerate(sets if sets is not None else [inputs]):  # type: ignore[list-item]
        where = in_dir / str(k) if sets is not None else in_dir
        tensorio.write_tensors(where, {name: tensorio.to_wire(name, a) for name, a in one.items()})
    return WrittenInputs(in_dir.resolve(), None if sets is None else len(sets))
