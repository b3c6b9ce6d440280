"""The kit's feedback on one evaluated answer, as the next user message of a refinement chain (``mkb refine``).

What a model is told (docs/generate.md): the status and its cause in words; for a compile error the first
compiler diagnostics (file, line, message, the source lines after it); for a mismatch the largest absolute and
relative errors and the tolerance; for a crash or timeout the cause; for a correct kernel the speedup over MNN's
native kernel with its 95 % interval and both times.  What it is never told: the verification seeds, the
reference outputs, the inputs, which timed forwards were checked (messages are stripped of seeds, and nothing
else of a record goes in).  The message is at most ``max_chars`` characters.
"""

from __future__ import annotations

import re

from kit.results.records import Diagnostic, Record, Status
from kit.suite.tasks import Task

#: a seed in a message ("seed 1234", "seed=1234"): the verification's inputs follow from it
_SEED = re.compile(r"\bseeds?\s*[=:]?\s*\d+(?:\s*,\s*\d+)*", re.IGNORECASE)
_DIAGNOSTICS_SHOWN = 8

_HEAD = {
    Status.COMPILE_ERROR: "Your files did not compile inside MNN.",
    Status.VERIFY_MISMATCH: "Your kernel compiled and ran, but its outputs differ from the reference.",
    Status.RUNTIME_CRASH: "Your kernel compiled, but the process running the model crashed.",
    Status.RUNTIME_TIMEOUT: "Your kernel compiled, but running the model did not finish in time.",
    Status.REJECTED_INPUT: "Your answer was not evaluated.",
    Status.TIMING_FAILED: "Your kernel is correct, but it could not be timed.",
}


def feedback(rec: Record, task: Task, max_chars: int = 4000) -> str:
    """The feedback message on ``rec`` (an evaluated answer to ``task``), at most ``max_chars`` characters."""
    if rec.status == Status.OK:
        body = _speed(rec)
    else:
        body = _HEAD.get(rec.status, f"Your answer ended with status {rec.status.value}.")
        body += "\n\n" + _cause(rec, task)
    body += ("\n\nAnswer with the complete files again, each in its own fenced code block whose first line "
             "names the file, as before.")
    if len(body) > max_chars:
        cut = f"\n[... {len(body) - max_chars + 40} characters left out]"
        body = body[: max_chars - len(cut)] + cut
    return body


def _speed(rec: Record) -> str:
    if rec.speedup is None:
        return "Your kernel is correct (it was not timed against the native kernel)."
    text = f"Your kernel is correct. Speedup over MNN's native kernel: {rec.speedup:.3f}x"
    if rec.speedup_ci_low is not None and rec.speedup_ci_high is not None:
        text += f" (95 % interval {rec.speedup_ci_low:.3f}-{rec.speedup_ci_high:.3f})"
    if rec.native_ms is not None and rec.candidate_ms is not None:
        text += f"; native {rec.native_ms:.4f} ms, yours {rec.candidate_ms:.4f} ms per run"
    return text + ". Make it faster while keeping it correct."


def _cause(rec: Record, task: Task) -> str:
    parts = []
    if rec.status == Status.COMPILE_ERROR and rec.diagnostics:
        errors = [d for d in rec.diagnostics if d.severity in ("error", "fatal error", "linker")] or rec.diagnostics
        parts.append("Compiler diagnostics:\n" + "\n".join(_diagnostic(d) for d in errors[:_DIAGNOSTICS_SHOWN]))
        if len(errors) > _DIAGNOSTICS_SHOWN:
            parts.append(f"({len(errors) - _DIAGNOSTICS_SHOWN} more not shown)")
    elif rec.error_message:
        parts.append(f"Cause ({rec.error_kind.value}): {_clean(rec.error_message)}")
    if rec.status == Status.VERIFY_MISMATCH and rec.max_abs_err is not None:
        tol = task.tolerance
        parts.append(f"Largest absolute error {rec.max_abs_err:.4g}"
                     + (f", largest relative error {rec.max_rel_err:.4g}" if rec.max_rel_err is not None else "")
                     + f"; allowed: atol {tol.atol:g}, rtol {tol.rtol:g}.")
    return "\n".join(parts) or f"({rec.error_kind.value})"


def _diagnostic(d: Diagnostic) -> str:
    where = d.file + (f":{d.line}" if d.line is not None else "") + (f":{d.column}" if d.column is not None else "")
    text = f"{where}: {d.severity}: {_clean(d.message)}"
    return text + ("\n" + d.context.rstrip() if d.context else "")


def _clean(text: str) -> str:
    """``text`` without seeds."""
    return _SEED.sub("seed <hidden>", text.strip())
