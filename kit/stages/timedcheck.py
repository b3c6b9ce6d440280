"""The outputs of a candidate's timed forwards against ONNX Runtime (the timing stage's last check, after the
node's exclusive phase).

Two kinds of timed forward are compared, at the task's tolerance (:func:`kit.stages.verify.trial_verdict`):

* the first timed forward of every run on each input set (seeds ``verify.seed + 500 + j``), with references by
  seed (computed here, or on a build node: :data:`kit.stages.verify.References`);
* the forwards on fresh inputs that the runner picked at random after each forward and wrote out
  (``RunResult.checked``, :mod:`kit.mnn.runner`): their references are computed here with the task's ONNX model
  (a timing node without task files gets the model's bytes shipped: :class:`kit.job.artefacts.Built`), on
  inputs the kit vouches for, since the runner's memory is the candidate's to write (the sets zeroed there:
  every later input zeros, zeros out right).  The kit's runner writes the pool index of every unit it drew:
  the kit rebuilds the inputs from the timed sets it generated itself at those indices, which must be distinct
  and in range (:func:`kit.mnn.fresh.rebuilt`); the fixture engine's runner writes the inputs, each of which
  must be drawable from those sets (:func:`kit.mnn.fresh.forged`).

A kernel wrong on either is wrong when timed: ``verify_mismatch`` with error kind ``timed_output_mismatch``; a
forged input is ``verify_mismatch``, ``inputs_forged`` (its outputs are not compared).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from kit.mnn import fresh
from kit.mnn import runner as mrunner
from kit.mnn.tensorio import to_wire
from kit.results.outcomes import StageFailure
from kit.results.records import ErrorKind, Status
from kit.stages.runfailure import protocol_failure
from kit.stages.verify import References, reference, trial_verdict
from kit.suite.reference import run_reference
from kit.suite.tasks import Task

_DTYPES = {"float32": np.float32, "int32": np.int32, "int64": np.int64, "bool": np.bool_}


def from_wire(task: Task, tensors: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The task's graph inputs from their wire form (float32/int32, :func:`kit.mnn.tensorio.to_wire`): each cast to
    the dtype its spec names (int64 and bool inputs travel as int32).

    Raises:
        StageFailure: RUNTIME_CRASH (``exit_code``) when a tensor is missing or has another shape than its spec
            (the runner wrote something else than it was given: the candidate's code in it)."""
    out = {}
    for spec in task.inputs:
        a = tensors.get(spec.name)
        if a is None or list(a.shape) != list(spec.shape):
            raise StageFailure(Status.RUNTIME_CRASH, ErrorKind.EXIT_CODE,
                               f"a checked forward's input {spec.name!r} is missing or not of shape {spec.shape}")
        out[spec.name] = a.astype(_DTYPES[spec.dtype], copy=False)
    return out


def check_timed_outputs(task: Task, runs: Sequence[mrunner.RunResult], seeds: Sequence[int], inputs: Sequence,
                        threads: int, refs: References | None = None, onnx: Path | None = None) -> None:
    """Compare the candidate's timed forwards with ONNX Runtime: each run's first timed forward on every input set
    (``seeds``, ``inputs``: graph input name → array per set; ``refs``: references computed elsewhere) and every
    forward the runner picked and wrote out (``run.checked``; references from ``onnx``, default the task's model),
    at the task's tolerance, on its inputs rebuilt from ``inputs`` at the runner's pool indices
    (:func:`kit.mnn.fresh.rebuilt`) or, where the runner wrote them, shown drawable from ``inputs``
    (:func:`kit.mnn.fresh.forged`).

    Raises:
        StageFailure: VERIFY_MISMATCH, ``inputs_forged`` when a checked forward's inputs cannot have been drawn from
            the timed sets (indices repeated or beyond them, or written inputs of other values), else
            ``timed_output_mismatch`` (the kernel is wrong when timed, so not functionally correct), naming how many
            of the compared forwards were, how many of those the runner checked at random (where any), and the
            first of them; RUNTIME_CRASH when a checked forward's files are unreadable or planted
            (:func:`kit.stages.runfailure.protocol_failure`) or its inputs are not the task's (:func:`from_wire`)."""
    out_names = [o.name for o in task.outputs]
    expected = [reference(task, seed, one, refs) for seed, one in zip(seeds, inputs)]
    sets = fresh.pools([{name: to_wire(name, a) for name, a in one.items()} for one in inputs])
    bad, forgeries, compared, at_random = [], [], 0, 0
    for r, run in enumerate(runs):
        for j, (seed, outputs, ref) in enumerate(zip(seeds, run.output_sets, expected)):
            compared += 1
            trial = trial_verdict(task, seed, threads, outputs, ref, out_names)[0]
            if not trial.ok:
                bad.append(f"round {r}, timed forward {j + 1} (seed {seed}): {trial.reason}")
        for picked in run.checked:
            compared += 1
            where = f"round {r}, timed forward {picked.forward} (fresh inputs, checked at random)"
            try:
                written, outputs = picked.read()
            except mrunner.RunnerProtocolError as exc:  # a link or a FIFO planted there, say: the candidate's
                raise protocol_failure(exc, f"candidate timing run (round {r})") from None
            if picked.drawn:  # the inputs rebuilt from the kit's own sets at the runner's indices
                wire_in, why = fresh.rebuilt(written, sets)
            else:  # the inputs as the runner wrote them: each must be drawable from the sets
                wire_in, why = written, fresh.forged(written, sets)
            if why:
                forgeries.append(f"{where}: {why[0]}")
                continue
            trial = trial_verdict(task, -1, threads, outputs,
                                  run_reference(onnx or task.onnx_path, from_wire(task, wire_in)), out_names)[0]
            if not trial.ok:
                bad.append(f"{where}: {trial.reason}")
                at_random += 1
    if forgeries:
        raise StageFailure(Status.VERIFY_MISMATCH, ErrorKind.INPUTS_FORGED,
                           f"the inputs the runner wrote out for {len(forgeries)} of the checked timed forwards are "
                           f"not drawn from the timed input sets the kit generated (the runner's memory was "
                           f"edited); first: {forgeries[0]}")
    if bad:
        # the first is in round order, sets before checks; how many the random checks caught is said either way
        also = f", {at_random} of them on fresh inputs checked at random" if at_random else ""
        raise StageFailure(Status.VERIFY_MISMATCH, ErrorKind.TIMED_OUTPUT_MISMATCH,
                           f"the outputs of the timed runs differ from ONNX Runtime in {len(bad)} of the {compared} "
                           f"timed forwards compared{also}; first: {bad[0]}")
