"""Build: the candidate's files registered in the worker's workspace, then an incremental build.

:func:`candidate_in` swaps the files in for the rest of the job (verification runs the libraries and the
converter built from them) and restores the workspace's sources after it, whatever happens;
:func:`build` runs ninja and classifies the outcome (compile error, linker error, timeout).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path

from kit.mnn import build as mbuild
from kit.mnn import register, runner_build, targets
from kit.mnn.workspace import Workspace
from kit.results.outcomes import BuildOutcome, StageFailure
from kit.results.records import Diagnostic, ErrorKind, Flag, Status
from kit.suite.tasks import Task

#: the statuses a file that cannot be placed stands for (:class:`kit.mnn.register.PlacementError`)
_PLACEMENT = {
    register.PlacementError.OVERWRITES: (Status.REJECTED_INPUT, ErrorKind.ALLOWLIST),
    register.PlacementError.DROPS_REGISTRATION: (Status.COMPILE_ERROR, ErrorKind.MISSING_SYMBOL),
}
#: at most this many diagnostics go into a record
MAX_DIAGNOSTICS = 50
#: what a compiler (or ninja) prints when a resource limit stopped it, and the limit's setting
_LIMIT_TEXTS = (("out of memory allocating", "the compiler's memory limit (sandbox.build_memory_mb)"),
                ("virtual memory exhausted", "the compiler's memory limit (sandbox.build_memory_mb)"),
                ("cannot allocate memory", "the compiler's memory limit (sandbox.build_memory_mb)"),
                ("file size limit exceeded", "the file-size limit (sandbox.file_mb)"),
                ("resource temporarily unavailable", "the process limit (sandbox.processes)"))


#: flag code: the workspace's sources differed from the pristine tree after the job (restored)
WORKSPACE_CHANGED = "workspace_changed"


@contextmanager
def candidate_in(ws: Workspace, task: Task, files: Mapping[str, str],
                 flags: list[Flag] | None = None, check_after: bool = True) -> Iterator[register.Swap]:
    """``files`` (basename → text) registered in ``ws`` for the block (the workspace is checked and repaired
    first, unless the worker's set-up just did: :attr:`Workspace.checked_at_setup`); its sources are restored when the block ends, whatever happens, and checked against the pristine
    tree again: a file that still differs (something the job ran wrote there) is restored and, with ``flags``,
    flagged :data:`WORKSPACE_CHANGED` (~0.2 s for MNN's 6,900 files; not with ``check_after`` False: the
    pipeline checks the whole workspace after the job anyway, :func:`check_after_job`).

    Raises:
        StageFailure: REJECTED_INPUT (ALLOWLIST) when a new file would replace an MNN file the task does not
            list, COMPILE_ERROR (MISSING_SYMBOL) when a replaced file drops an op type's registration.
        kit.mnn.register.RegisterError: the registration generator failed (a harness fault).
    """
    swap = register.Swap()
    try:
        if not ws.checked_at_setup:
            ws.check_and_repair()
        ws.checked_at_setup = False
        try:
            swap = register.apply(ws, task, files)
        except register.PlacementError as exc:
            status, kind = _PLACEMENT[exc.reason]
            raise StageFailure(status, kind, str(exc)) from None
        yield swap
    finally:
        register.restore(ws, swap)
        changed = ws.check_and_repair() if check_after else []
        if changed and flags is not None:
            flags.append(Flag(code=WORKSPACE_CHANGED, reason="after the job the workspace's sources differed from "
                              f"the pristine tree (restored): {', '.join(changed[:5])}"))


def check_after_job(ws: Workspace, flags: list[Flag]) -> None:
    """The workspace after a job, whatever its end: its sources repaired to the pristine tree's, the files
    written into its build directory since the job's build removed (:meth:`Workspace.remove_written_since_build`),
    and either flagged :data:`WORKSPACE_CHANGED` (the sandbox shows neither to a run; without it, this is where
    a planted file is caught).

    Raises:
        kit.mnn.workspace.WorkspaceError: a pristine file changed (a harness fault)."""
    changed = [f"src/{p}" for p in ws.check_and_repair()] + [f"build/{p}" for p in ws.remove_written_since_build()]
    if changed:
        flags.append(Flag(code=WORKSPACE_CHANGED, reason="after the job the workspace differed from what the kit "
                          f"left (repaired): {', '.join(changed[:5])}" + (" ..." if len(changed) > 5 else "")))


def originals(ws: Workspace, task: Task, files: Mapping[str, str]) -> dict[str, str]:
    """The pristine text of the files ``files`` replace (MNN-relative path → text; new files have none)."""
    out = {}
    for name in files:
        rel = task.place(name)
        if rel is not None and (ws.pristine.root / rel).is_file():
            out[rel] = (ws.pristine.root / rel).read_text(encoding="utf-8", errors="replace")
    return out


def candidate_objects(ws: Workspace, swap: register.Swap) -> list[Path]:
    """The object files the build compiled from the candidate's replaced and added sources (CMake names them
    ``<target>.dir/<source path>.o`` under the build directory)."""
    sources = [rel for rel in (*swap.replaced, *swap.added) if rel.endswith((".c", ".cc", ".cpp", ".cxx"))]
    return sorted(obj for rel in sources for obj in ws.build.glob(f"**/{rel}.o"))


def relevant(diags: list[Diagnostic], swap: register.Swap, ok: bool) -> list[Diagnostic]:
    """Diagnostics worth showing: every error (a removed symbol fails in another file), but warnings and
    notes only from the candidate's own files; at most :data:`MAX_DIAGNOSTICS`."""
    mine = set(swap.replaced) | set(swap.added)
    keep = [d for d in diags if d.file in mine or (not ok and d.severity in ("error", "fatal error", "linker"))]
    return keep[:MAX_DIAGNOSTICS]


def build(ws: Workspace, swap: register.Swap, opts: mbuild.BuildOptions,
          hold: Callable[[], AbstractContextManager[object]] = nullcontext,
          runner_out: Path | None = None) -> BuildOutcome:
    """Build ``ws`` (with ``swap``'s files in it) inside ``hold()`` (the node's shared hold): the targets
    :func:`job_targets` names; with ``runner_out``, then link the build's own runner there (a static target:
    the runner is the library's link check, :func:`kit.mnn.build.link_runner`; its seconds count in ``build_s``).

    Raises:
        StageFailure: COMPILE_TIMEOUT (TIMEOUT) or COMPILE_ERROR (COMPILER, or LINKER when every error is the
            linker's), with the :class:`BuildOutcome` (diagnostics, log tail) as its ``partial``.
        kit.mnn.build.ConfigureError: the re-configure failed (a harness fault).
    """
    goals = job_targets(ws, swap, opts)
    with hold():
        try:
            b = mbuild.build(ws, opts, timeout_s=opts.candidate_timeout_s, goals=goals)
        finally:
            ws.built_ns = time.time_ns()  # what is written into the build directory after this is no build's
    if b.ok and not b.timed_out:  # the converter now is this candidate's, or the pristine one again
        ws.set_state(**{targets.CONVERTER_STATE: _changes_converter(swap)})
    outcome = BuildOutcome(
        build_s=b.wall_s + b.configure_s,
        diagnostics=tuple(relevant(b.diagnostics, swap, b.ok and not b.timed_out)),
        log_tail=b.log_tail[-4000:],
    )
    if b.timed_out:
        raise StageFailure(Status.COMPILE_TIMEOUT, ErrorKind.TIMEOUT,
                           f"build exceeded build.candidate_timeout_s = {opts.candidate_timeout_s:g} s", partial=outcome)
    if not b.ok:
        low = b.log_tail.lower()
        cause = next((c for text, c in _LIMIT_TEXTS if text in low), None)
        if cause is not None:
            raise StageFailure(Status.COMPILE_ERROR, ErrorKind.LIMIT, f"the build was stopped by {cause}",
                               partial=outcome)
        errors = [d for d in b.diagnostics if d.severity in ("error", "fatal error", "linker")]
        kind = ErrorKind.LINKER if errors and all(d.severity == "linker" for d in errors) else ErrorKind.COMPILER
        first = errors[0] if errors else None
        msg = f"{first.file}:{first.line}: {first.message}" if first else "build failed (see build_log_tail)"
        raise StageFailure(Status.COMPILE_ERROR, kind, msg, partial=outcome)
    if runner_out is not None:
        return _linked(ws, opts, runner_out, replace(outcome, log_tail=""), hold, swap)
    return replace(outcome, log_tail="")


def _changes_converter(swap: register.Swap) -> bool:
    return targets.changes_converter([*swap.replaced, *swap.added])


def job_targets(ws: Workspace, swap: register.Swap, opts: mbuild.BuildOptions) -> list[str]:
    """The ninja targets of a candidate's build (:func:`kit.mnn.targets.candidate_targets`): the converter too
    when the candidate changes a converter source, or when the workspace's converter is a previous candidate's
    (its state says so; set here before such a build, so a killed job leaves it set)."""
    changes = _changes_converter(swap)
    if changes:
        ws.set_state(**{targets.CONVERTER_STATE: True})
    stale = bool(ws.state().get(targets.CONVERTER_STATE, False))
    return targets.candidate_targets(opts.engine, opts.target, changes, stale)


def _linked(ws: Workspace, opts: mbuild.BuildOptions, out: Path, outcome: BuildOutcome,
            hold: Callable[[], AbstractContextManager[object]], swap: register.Swap) -> BuildOutcome:
    """``outcome`` after linking the build's runner at ``out`` (its seconds added).

    Raises:
        StageFailure: COMPILE_ERROR (LINKER) when the link fails: an undefined symbol of the candidate's library."""
    t0 = time.monotonic()
    try:
        with hold():
            mbuild.link_runner(ws, opts, out)
    except runner_build.RunnerBuildError as exc:
        log = exc.proc.output if exc.proc is not None else str(exc)
        diags = tuple(relevant(mbuild.parse_diagnostics(log, ws.src), swap, ok=False))
        failed = replace(outcome, build_s=outcome.build_s + time.monotonic() - t0, diagnostics=diags,
                         log_tail="\n".join(log.splitlines()[-60:])[-4000:])
        first = next((d for d in diags if d.severity in ("error", "fatal error", "linker")), None)
        raise StageFailure(Status.COMPILE_ERROR, ErrorKind.LINKER,
                           f"the runner's link failed: {first.message if first else str(exc)[:300]}",
                           partial=failed) from None
    return replace(outcome, build_s=outcome.build_s + time.monotonic() - t0)
