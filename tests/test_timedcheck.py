"""kit.stages.timedcheck on what a runner leaves in its output directory, without an engine: the kit's runner
writes a checked forward's pool indices (``draw/``) and the kit rebuilds its inputs from its own sets; indices that
are no sample without replacement are ``inputs_forged``, outputs wrong on the rebuilt inputs
``timed_output_mismatch``; a runner that writes the inputs themselves (``in/``: the fixture engine's) is checked
against the sets."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from conftest_fixture import FIXTURE_ROOT

from kit.mnn import tensorio
from kit.mnn.runresult import CheckedForward
from kit.results.outcomes import StageFailure
from kit.results.records import ErrorKind
from kit.stages.timedcheck import check_timed_outputs
from kit.suite.inputs import make_inputs
from kit.suite.reference import run_reference
from kit.suite.tasks import load_suite

TASK = next(t for t in load_suite(FIXTURE_ROOT / "tasks", "all", None) if t.id == "fx_sub")
SEEDS = [500, 501]
SETS = [make_inputs(TASK, s) for s in SEEDS]


def _draw(seed: int = 1) -> dict[str, np.ndarray]:
    """Pool indices as the kit's runner draws them for fx_sub (both tensors at most 65 536 elements: single
    elements, set * size + element)."""
    rng = np.random.default_rng(seed)
    return {name: rng.permutation(2 * a.size)[:a.size].astype(np.int32) for name, a in SETS[0].items()}


def _rebuilt(draw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {name: np.concatenate([s[name].ravel() for s in SETS])[draw[name]].reshape(SETS[0][name].shape)
            for name in draw}


def _run(tmp: Path, written: dict[str, np.ndarray], outputs: dict[str, np.ndarray], drawn: bool = True):
    """One candidate run that wrote its set outputs right and one checked forward: ``written`` in ``draw/`` (or
    ``in/``), ``outputs`` in ``out/``."""
    where = tmp / "out" / "checked" / "0"
    tensorio.write_tensors(where / ("draw" if drawn else "in"), written)
    tensorio.write_tensors(where / "out", {k: tensorio.to_wire(k, v) for k, v in outputs.items()})
    sets = tuple({k: tensorio.to_wire(k, v) for k, v in run_reference(TASK.onnx_path, one).items()} for one in SETS)
    return SimpleNamespace(output_sets=sets, checked=(CheckedForward(5, where, tmp / "out", drawn),))


def _check(run) -> None:
    check_timed_outputs(TASK, [run], SEEDS, SETS, threads=1)


def test_outputs_right_on_the_rebuilt_inputs_pass(tmp_path):
    draw = _draw()
    _check(_run(tmp_path, draw, run_reference(TASK.onnx_path, _rebuilt(draw))))


def test_indices_that_are_no_sample_are_inputs_forged(tmp_path):
    draw = _draw()
    right = run_reference(TASK.onnx_path, _rebuilt(draw))
    draw["a"][1] = draw["a"][0]  # a value taken twice
    with pytest.raises(StageFailure) as e:
        _check(_run(tmp_path, draw, right))
    assert e.value.kind == ErrorKind.INPUTS_FORGED and "input 'a'" in e.value.message


def test_outputs_of_other_inputs_are_a_timed_output_mismatch(tmp_path):
    # the sets zeroed in the runner's memory: the forward ran on zeros, the indices name the sets' values
    draw = _draw()
    zeros = {name: np.zeros_like(a) for name, a in SETS[0].items()}
    with pytest.raises(StageFailure) as e:
        _check(_run(tmp_path, draw, run_reference(TASK.onnx_path, zeros)))
    assert e.value.kind == ErrorKind.TIMED_OUTPUT_MISMATCH and "checked at random" in e.value.message



def test_the_message_counts_the_random_checks_that_failed_even_when_a_set_forward_failed_first(tmp_path):
    # a kernel wrong on a set's first forward as well: the first named is that one (round order, sets first), and
    # the message still says how many of the wrong forwards the random checks caught (0: not said)
    draw = _draw()
    zeros = {name: np.zeros_like(a) for name, a in SETS[0].items()}
    run = _run(tmp_path, draw, run_reference(TASK.onnx_path, zeros))
    run.output_sets = ({k: np.zeros_like(v) for k, v in run.output_sets[0].items()}, run.output_sets[1])
    with pytest.raises(StageFailure) as e:
        _check(run)
    assert e.value.kind == ErrorKind.TIMED_OUTPUT_MISMATCH
    assert "in 2 of the 3 timed forwards compared, 1 of them on fresh inputs checked at random; first: round 0, " \
           "timed forward 1 (seed 500)" in e.value.message, e.value.message
    right = _run(tmp_path / "again", draw, run_reference(TASK.onnx_path, _rebuilt(draw)))
    right.output_sets = ({k: np.zeros_like(v) for k, v in right.output_sets[0].items()}, right.output_sets[1])
    with pytest.raises(StageFailure) as e:
        _check(right)
    assert "in 1 of the 3 timed forwards compared; first" in e.value.message, e.value.message

def test_written_inputs_are_checked_against_the_sets(tmp_path):
    zeros = {name: np.zeros_like(a) for name, a in SETS[0].items()}
    with pytest.raises(StageFailure) as e:
        _check(_run(tmp_path, zeros, run_reference(TASK.onnx_path, zeros), drawn=False))
    assert e.value.kind == ErrorKind.INPUTS_FORGED
    sample = _rebuilt(_draw(2))
    _check(_run(tmp_path / "ok", sample, run_reference(TASK.onnx_path, sample), drawn=False))
