"""Verification: convert the task's ONNX model with a given converter, run it on seeded inputs with the
kit's runner, and compare every output with ONNX Runtime.

A trial is one seeded input set.  The trials at one thread count run as several input sets in ONE runner
process, one forward each, in order (:meth:`VerifyOptions.groups`): a kernel that caches its first result, or
is correct only on its first call, fails the next set.  The runner also stops a forward that wrote into an
input (``input_modified``), left a thread running (``threads_left``) or started a process (``processes_left``;
:mod:`kit.mnn.runner`).

A trial passes when every output matches in shape, dtype family, NaN/Inf placement and
``|out - ref| <= atol + rtol * |ref|`` (the task's tolerance; :mod:`kit.suite.compare`).  All trials run even after
a mismatch, so the record shows how often and by how much the candidate is wrong; a crash or timeout stops
at once.  :func:`reverify` runs the trials again with other seeds after the timing stage.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from kit.host import sandbox
from kit.mnn import convert as mconvert
from kit.mnn import runner as mrunner
from kit.results.outcomes import StageFailure, VerifyOutcome
from kit.results.records import EdgeSet, ErrorKind, Status, Trial
from kit.stages.runfailure import process_failure, protocol_failure
from kit.suite.compare import compare
from kit.suite.edges import edge_inputs
from kit.suite.inputs import make_inputs
from kit.suite.reference import run_reference
from kit.suite.tasks import Task


@dataclass(frozen=True)
class VerifyOptions:
    """``trials`` seeded input sets (seeds ``seed``, ``seed + 1``, ...) at ``run.threads`` threads, then the
    first ``extra_trials`` of them again at each of ``extra_threads`` (a kernel whose multi-threaded split is
    wrong fails there); ``convert_timeout_s`` and ``run_timeout_s``: seconds for one converter and one runner
    process (which runs every trial of its thread count); ``run``: threads, precision and memory limit of the runner (timing's), whose
    ``memory_limit_bytes`` caps the converter too; ``convert_policy``: how the converter is confined."""

    trials: int = 5
    seed: int = 0
    convert_timeout_s: float = 120.0
    run_timeout_s: float = 60.0
    run: mrunner.RunSettings = mrunner.RunSettings()
    extra_threads: tuple[int, ...] = ()
    extra_trials: int = 2
    convert_policy: sandbox.Policy = sandbox.Policy()

    def plan(self) -> list[tuple[int, int]]:
        """(seed, threads) of every trial, in order."""
        return [(seed, threads) for threads, seeds in self.groups() for seed in seeds]

    def groups(self) -> list[tuple[int, list[int]]]:
        """(threads, seeds) of each runner process, in order: the ``trials`` seeds at ``run.threads``, then the
        first ``extra_trials`` seeds at each further thread count (one process each)."""
        out = [(self.run.threads, [self.seed + k for k in range(self.trials)])]
        for threads in dict.fromkeys(self.extra_threads):
            if threads != self.run.threads:
                out.append((threads, [self.seed + k for k in range(min(self.extra_trials, self.trials))]))
        return out


#: seed → ONNX Runtime's outputs (name → array) for the inputs drawn with that seed, computed elsewhere (on a
#: build node, for a timing node that has no task files); a seed missing from it is computed here
References = Mapping[int, Mapping[str, np.ndarray]]


def reference(task: Task, seed: int, inputs: Mapping[str, np.ndarray], refs: References | None = None):
    """ONNX Runtime's outputs for ``inputs`` (drawn with ``seed``): from ``refs`` when it has the seed."""
    if refs is not None and seed in refs:
        return refs[seed]
    return run_reference(task.onnx_path, dict(inputs))


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a converter and the library directory it and the runner load
    (``converter`` is None on a timing node, which receives converted models).  A cross build's side differs:
    its ``runner`` is its own (the engine linked in statically; ``lib_dir`` None), and its converter is the build
    host's, loading ``converter_lib_dir``."""

    converter: Path | None
    lib_dir: Path | None
    #: this side's own runner (None: the runner the caller passes, loading ``lib_dir``)
    runner: Path | None = None
    #: the libraries the converter loads, when not ``lib_dir``
    converter_lib_dir: Path | None = None

    @property
    def converter_libs(self) -> Path | None:
        """The library directory the converter runs against."""
        return self.converter_lib_dir or self.lib_dir


@dataclass(frozen=True)
class SideModel:
    """A converted model on one side of a comparison: what verification checks and timing times.

    ``model``: the ``.mnn`` file (converted by ``side``'s converter, or received converted on a timing node);
    ``side``: what runs it (:class:`Side`: the libraries the runner loads, or a runner of its own)."""

    model: Path
    side: Side


def run_checked(runner: Path, model: Path, inputs, out_names, lib_dir: Path | None, settings: mrunner.RunSettings,
                scratch: Path) -> mrunner.RunResult:
    """:func:`kit.mnn.runner.run_model`, where a runner that breaks its protocol (exits 0 without outputs,
    exits with its usage code, a link among its outputs) ran candidate code that called ``exit()``, corrupted
    its state or planted files: that is the candidate's failure, not the kit's (:func:`kit.stages.runfailure.protocol_failure`).

    Raises:
        StageFailure: RUNTIME_CRASH (``exit_code``; ``forbidden`` for a planted file) for a protocol violation.
    """
    try:
        return mrunner.run_model(runner, model, inputs, out_names, lib_dir, settings, scratch=scratch)
    except mrunner.RunnerProtocolError as exc:
        raise protocol_failure(exc, "runner") from None


def convert(task: Task, side: Side, out: Path, opts: VerifyOptions) -> Path:
    """Convert ``task``'s ONNX model with ``side``'s converter into ``out``.

    Raises:
        StageFailure: RUNTIME_TIMEOUT / RUNTIME_CRASH (signal) of the converter, or VERIFY_MISMATCH with
            kind CONVERT when it reports failure ("Converted Failed!", unsupported op, no output file).
        ValueError: ``side.converter`` is None.
    """
    if side.converter is None:
        raise ValueError("convert: this side has no converter (a timing node receives converted models)")
    out.parent.mkdir(parents=True, exist_ok=True)
    how = mconvert.ConvertOptions(timeout_s=opts.convert_timeout_s, memory_limit_bytes=opts.run.memory_limit_bytes,
                                  policy=opts.convert_policy)
    res = mconvert.convert(side.converter, task.onnx_path, out, how, env=mrunner.runner_env(side.converter_libs),
                           lib_dir=side.converter_libs)
    if res.proc.timed_out or res.proc.signal is not None:
        fail = process_failure(res.proc, "MNNConvert")
        assert fail is not None
        fail.kind = ErrorKind.CONVERT if fail.kind not in (ErrorKind.TIMEOUT, ErrorKind.LIMIT) else fail.kind
        raise fail
    if not res.ok:
        raise StageFailure(Status.VERIFY_MISMATCH, ErrorKind.CONVERT, f"MNNConvert failed: {res.reason}\n{res.log[-1500:]}")
    return out


def convert_and_verify(task: Task, side: Side, runner: Path, scratch: Path, opts: VerifyOptions) -> tuple[Path, VerifyOutcome]:
    """:func:`convert` the task with ``side``'s converter into ``scratch/candidate.mnn``, then :func:`verify`
    it; the outcome carries both stages' seconds (``convert_s``, ``verify_s``; the latter without the seconds
    its runs were paused for a timing phase).

    Raises:
        StageFailure: as :func:`convert` and :func:`verify`."""
    t0 = time.monotonic()
    model = convert(task, side, scratch / "candidate.mnn", opts)
    convert_s = time.monotonic() - t0
    try:
        outcome = verify(task, model, side, runner, scratch / "verify", opts)
    except StageFailure as f:
        if isinstance(f.partial, VerifyOutcome):
            f.partial = replace(f.partial, convert_s=convert_s)
        raise
    return model, replace(outcome, convert_s=convert_s)


def verify(task: Task, model: Path, side: Side, runner: Path, scratch: Path, opts: VerifyOptions,
           refs: References | None = None) -> VerifyOutcome:
    """Run ``model`` on every trial of ``opts.plan()`` (seeded input sets, thread counts; the sets of one thread
    count in one runner process, :meth:`VerifyOptions.groups`) and compare with ONNX Runtime (``refs``: the
    references of some seeds, computed elsewhere).  Every trial runs even after a mismatch; a crash or timeout
    stops at once.

    Returns the trials (all passed) and ``verify_s``, the seconds they took (paused seconds excluded).

    Raises:
        StageFailure: VERIFY_MISMATCH (a wrong output, or a forward that wrote into its input), RUNTIME_CRASH
            (a crash, a thread left running) or RUNTIME_TIMEOUT, with the trials run so far as its ``partial``.
    """
    trials: list[Trial] = []
    out_names = [o.name for o in task.outputs]
    base = replace(opts.run, warmup=0, iterations=0, op_types=("*",), timeout_s=opts.run_timeout_s, cpus=())
    first: tuple[Trial, ErrorKind] | None = None
    t0, paused = time.monotonic(), 0.0
    for k, (threads, seeds) in enumerate(opts.groups()):
        inputs = [make_inputs(task, seed) for seed in seeds]
        expected = [reference(task, seed, one, refs) for seed, one in zip(seeds, inputs)]
        res = run_checked(side.runner or runner, model, inputs, out_names, side.lib_dir, replace(base, threads=threads),
                          scratch / f"run{k}")
        paused += res.proc.paused_s
        fail = process_failure(res.proc, "runner")
        if fail is not None:
            fail.partial = VerifyOutcome(tuple(trials), verify_s=time.monotonic() - t0 - paused)
            raise fail
        for seed, outputs, ref in zip(seeds, res.output_sets, expected):
            t, kind = trial_verdict(task, seed, threads, outputs, ref, out_names)
            trials.append(t)
            if not t.ok and first is None:
                first = (t, kind)
    outcome = VerifyOutcome(tuple(trials), verify_s=time.monotonic() - t0 - paused)
    if first is not None:
        bad = sum(not t.ok for t in trials)
        at = f", {first[0].threads} threads" if first[0].threads != opts.run.threads else ""
        raise StageFailure(
            Status.VERIFY_MISMATCH,
            first[1],
            f"{bad}/{len(trials)} trials failed; first (seed {first[0].seed}{at}): {first[0].reason}",
            partial=outcome,
        )
    return outcome


#: failures of an edge set's runner that stand for the candidate's conduct, not for its result on the set: they
#: fail the job as in the trials (any other crash or timeout only fails the sets)
_CONDUCT_KINDS = frozenset({ErrorKind.INPUT_MODIFIED, ErrorKind.THREADS_LEFT, ErrorKind.PROCESSES_LEFT,
                            ErrorKind.FORBIDDEN, ErrorKind.LIMIT})


def run_edges(task: Task, model: Path, side: Side, runner: Path, scratch: Path,
              opts: VerifyOptions, native_failed: frozenset[str] = frozenset()) -> tuple[EdgeSet, ...]:
    """Run ``model`` on every edge input set ``task`` declares (:func:`kit.suite.edges.edge_inputs` at
    ``opts.seed``; one runner process, one forward per set, at ``opts.run.threads``) and compare each with ONNX
    Runtime as a trial is (:func:`trial_verdict`).  A set's failure does not fail the job: it is recorded
    (``ok`` False, the reason) and strict correctness counts it (:func:`kit.results.records.edges_pass`).
    Sets of another input shape (``size_one_axes``, ``empty_axes``) run in a runner process of their own (one
    shape per process).  A crash or timeout of a process fails its sets; ``native_ok`` is left None (the caller
    fills it).  ``native_failed``: the sets native MNN fails, never held against a candidate: a process whose
    every set is one of them fails its sets even for its conduct, not the job.

    Raises:
        StageFailure: the runner stopped a forward for its conduct (an input written, a thread or process
            left, a forbidden call, a resource limit), as in :func:`verify`, on a set native MNN does not fail.
    """
    if not task.edges:
        return ()
    out_names = [o.name for o in task.outputs]
    inputs = [edge_inputs(task, e, opts.seed) for e in task.edges]
    with np.errstate(all="ignore"):
        expected = [run_reference(task.onnx_path, dict(one)) for one in inputs]
    base = replace(opts.run, warmup=0, iterations=0, op_types=("*",), timeout_s=opts.run_timeout_s, cpus=())
    groups: dict[tuple, list[int]] = {}  # the runner takes one shape per process: a cut axis runs apart
    for k, one in enumerate(inputs):
        groups.setdefault(tuple((n, a.shape) for n, a in sorted(one.items())), []).append(k)
    verdicts: dict[int, EdgeSet] = {}
    for g, members in enumerate(groups.values()):
        where = scratch if len(groups) == 1 else scratch / f"shape{g}"
        res = run_checked(side.runner or runner, model, [inputs[k] for k in members], out_names, side.lib_dir, base,
                          where)
        fail = process_failure(res.proc, "runner (edge sets)")
        if fail is not None and fail.kind in _CONDUCT_KINDS and any(task.edges[k].name not in native_failed
                                                                     for k in members):
            raise fail
        for k, outputs in zip(members, res.output_sets if fail is None else [None] * len(members)):
            e = task.edges[k]
            if outputs is None:
                verdicts[k] = EdgeSet(name=e.name, ok=False, reason=fail.message[:300])
                continue
            with np.errstate(all="ignore"):
                t, _ = trial_verdict(task, opts.seed, opts.run.threads, outputs, expected[k], out_names)
            verdicts[k] = EdgeSet(name=e.name, ok=t.ok, reason=t.reason[:300])
    return tuple(verdicts[k] for k in range(len(task.edges)))


#: verification after timing draws its seeds from ``verify.seed + REVERIFY_SEED_OFFSET + salt``: other inputs
#: than every set the candidate has seen (verification's ``seed + k``, timing's ``seed + 500 + j``)
REVERIFY_SEED_OFFSET = 1000


def reverify_salt(candidate_sha256: str) -> int:
    """A number in [0, 2**32) from the candidate's sha256 (the first 4 bytes of its sha256): the seeds of the
    verification after timing depend on the candidate's own code, so no candidate can have been written for
    them, while a record stays reproducible (its trials carry the seeds)."""
    return int.from_bytes(hashlib.sha256(candidate_sha256.encode()).digest()[:4], "little")


def reverify_options(opts: VerifyOptions, salt: int = 0) -> VerifyOptions:
    """The options of the verification after timing: ``opts`` with the seeds
    ``seed + REVERIFY_SEED_OFFSET + salt + k``."""
    return replace(opts, seed=opts.seed + REVERIFY_SEED_OFFSET + salt)


def reverify(task: Task, candidate: SideModel, runner: Path, scratch: Path, opts: VerifyOptions,
             salt: int = 0, refs: References | None = None) -> VerifyOutcome:
    """:func:`verify` ``candidate`` once more, after the timing stage, with :func:`reverify_options` (``salt``:
    :func:`reverify_salt`; ``runner``: the runner of a side without its own; ``refs``: as :func:`verify`): a
    kernel must stay correct over all its calls, not only until it has been verified.

    Returns the trials (all passed) and their seconds, as :func:`verify`.

    Raises:
        StageFailure: as :func:`verify`, its message saying that it happened after timing.
    """
    again = reverify_options(opts, salt)
    try:
        return verify(task, candidate.model, candidate.side, runner, scratch, again, refs)
    except StageFailure as f:
        f.message = f"after timing, verification with seeds from {again.seed}: {f.message}"
        raise


def trial_verdict(task: Task, seed: int, threads: int, outputs, ref, out_names: list[str]) -> tuple[Trial, ErrorKind]:
    """One trial's verdict: every output (name → array, one input set's) compared with the reference (the
    first failing output decides)."""
    worst_abs = worst_rel = 0.0
    ok, reason, kind = True, "", ErrorKind.NONE
    for name in out_names:
        if name not in outputs:
            ok, reason, kind = False, f"output {name!r} missing", ErrorKind.GRAPH
            break
        c = compare(outputs[name], ref[name], task.tolerance.atol, task.tolerance.rtol)
        if c.max_abs_err is not None:
            worst_abs = max(worst_abs, c.max_abs_err)
            worst_rel = max(worst_rel, c.max_rel_err or 0.0)
        if not c.ok:
            ok, reason, kind = False, f"{name}: {c.reason}", c.kind
            break
    return Trial(seed=seed, ok=ok, max_abs_err=worst_abs, max_rel_err=worst_rel, reason=reason, threads=threads), kind
