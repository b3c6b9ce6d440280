"""The cost of vouching for a checked forward's inputs (:mod:`kit.mnn.fresh`), beside what the kit already spends on
that forward (:func:`kit.stages.timedcheck.check_timed_outputs`: read its inputs and outputs, ONNX Runtime on the
inputs, the comparison), per checked forward, on the tasks of the sample set.

The checked inputs are derived as the kit's runner derives them (``runner/mkb_fresh.hpp``: units of
``fresh.UNIT_ELEMENTS`` elements without replacement for a tensor of more than 65 536 elements, elements below)
from the two timed sets the kit draws, with the pool indices the runner writes; ONNX Runtime's outputs stand in
for the candidate's.  Three parts alternate, ``repeats`` times each: the forward's read and comparison, the check
of inputs the runner wrote by sorting (the fixture engine's runner's way), their rebuilding from the indices (the
kit's runner's way); medians and ranges in ms are printed, with the sets' sort, made once per timing stage where
inputs are written.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kit.bench.common import ROOT
from kit.mnn import fresh, tensorio
from kit.stages.timedcheck import from_wire
from kit.stages.timing import TIMED_SEED_OFFSET, TIMED_SETS
from kit.stages.verify import trial_verdict
from kit.suite.inputs import make_inputs
from kit.suite.reference import run_reference
from kit.suite.tasks import Task, load_suite


def derive(sets: list[np.ndarray], rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One fresh input of one tensor from its timed sets, as the kit's runner derives it, and the pool indices it
    writes for it (``FreshInputs::drawn``: set * units + unit, then set * rest + element; int32)."""
    n = sets[0].size
    unit = 1 if n <= fresh.ELEMENTWISE_UP_TO else fresh.UNIT_ELEMENTS
    units, rest_n = n // unit, n % unit
    cut = units * unit
    rows = np.concatenate([s.reshape(-1)[:cut].reshape(-1, unit) for s in sets])
    rest = np.concatenate([s.reshape(-1)[cut:] for s in sets])
    head, back = rng.permutation(len(rows))[:units], rng.permutation(rest.size)[:rest_n]
    drawn = np.concatenate([rows[head].reshape(-1), rest[back]]).reshape(sets[0].shape)
    return drawn, np.concatenate([head, back]).astype(np.int32)


def _sort(pools: dict[str, fresh.Pool]) -> None:
    """What the check of written inputs sorts once per timing stage."""
    for pool in pools.values():
        _ = pool.units if pool.by_units else pool.elements


def _ms(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def _one(task: Task, repeats: int, tmp: Path) -> str:
    sets = [{name: tensorio.to_wire(name, a) for name, a in make_inputs(task, TIMED_SEED_OFFSET + j).items()}
            for j in range(TIMED_SETS)]
    rng = np.random.default_rng(0)
    both = {name: derive([s[name] for s in sets], rng) for name in sets[0]}
    drawn, draw = {n: d for n, (d, _) in both.items()}, {n: i for n, (_, i) in both.items()}
    ref = run_reference(task.onnx_path, from_wire(task, drawn))
    tensorio.write_tensors(tmp / "in", drawn)
    tensorio.write_tensors(tmp / "out", {k: tensorio.to_wire(k, v) for k, v in ref.items()})
    names = [o.name for o in task.outputs]

    def compared() -> None:
        wire_in, outputs = tensorio.read_tensors(tmp / "in"), tensorio.read_tensors(tmp / "out")
        trial_verdict(task, -1, 1, outputs, run_reference(task.onnx_path, from_wire(task, wire_in)), names)

    pools = fresh.pools(sets)
    build = _ms(lambda: _sort(pools))
    before, check, again = [], [], []
    for _ in range(repeats):
        before.append(_ms(compared))
        check.append(_ms(lambda: fresh.forged(drawn, pools)))  # the stage has read the inputs already
        again.append(_ms(lambda: fresh.rebuilt(draw, pools)))
    elements = sum(a.size for a in drawn.values())
    med_b, med_c, med_r = statistics.median(before), statistics.median(check), statistics.median(again)
    return (f"{task.id:24s} {len(drawn)} inputs, {elements:>9,} elements: checked forward {med_b:7.1f} ms "
            f"({min(before):.1f}-{max(before):.1f}); written inputs checked {med_c:6.1f} ms "
            f"({min(check):.1f}-{max(check):.1f}), +{med_c / med_b:.0%}, the sets' sort {build:.1f} ms once; "
            f"rebuilt from indices {med_r:6.1f} ms ({min(again):.1f}-{max(again):.1f})")


def input_check_cost(task_ids: tuple[str, ...] | None, repeats: int) -> int:
    """Print the cost of the input check per checked forward for ``task_ids`` (default: the sample set's tasks);
    returns 0."""
    ids = list(task_ids) if task_ids else sorted(p.name for p in (ROOT / "candidates" / "sample").iterdir()
                                                  if p.is_dir())
    for task in load_suite(ROOT / "tasks", "all", ids):
        with tempfile.TemporaryDirectory(prefix="mkb-inputcheck-") as tmp:
            print(_one(task, repeats, Path(tmp)), flush=True)
    return 0
