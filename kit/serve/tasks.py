"""What ``mkb serve`` shows of a task: what a model may see (its prompt, shapes, dtypes, value ranges, tolerance,
the file names a candidate may use), never the verification seeds nor reference outputs."""

from __future__ import annotations

import logging
from pathlib import Path, PurePosixPath

from kit.serve.models import TaskDetail, TaskSummary, TensorView
from kit.suite.prompts import PromptError, build_prompt
from kit.suite.tasks import Task

log = logging.getLogger("kit")


def summary(task: Task) -> TaskSummary:
    return TaskSummary(id=task.id, category=task.category, op_type=task.op_type, mechanism=task.mechanism,
                       split=task.split, description=task.description)


#: prompts made so far, by (task folder, MNN tree): a prompt reads a dozen files
_PROMPTS: dict[tuple[Path | None, Path], tuple[str | None, str]] = {}


def _prompt(task: Task, mnn_root: Path) -> tuple[str | None, str]:
    """``(prompt, "")``, or ``(None, why)`` when the MNN tree lacks a file the prompt quotes."""
    key = (task.path, mnn_root)
    if key not in _PROMPTS:
        try:
            _PROMPTS[key] = build_prompt(task, mnn_root), ""
        except PromptError as exc:  # the operator's log has the path; a client is not told where the tree is
            log.warning("task %s: no prompt: %s", task.id, exc)
            _PROMPTS[key] = None, "the service's MNN tree lacks a file the prompt quotes"
    return _PROMPTS[key]


def detail(task: Task, mnn_root: Path | None) -> TaskDetail:
    """``task`` as a model may see it (:class:`kit.serve.models.TaskDetail`); its prompt quotes headers and the
    replaced files from the MNN tree at ``mnn_root`` (None: no prompt)."""
    prompt, why = _prompt(task, mnn_root) if mnn_root is not None else (None, "no MNN tree")
    inputs = [TensorView(name=t.name, shape=list(t.shape), dtype=t.dtype, distribution=t.distribution, low=t.low,
                         high=t.high) for t in task.inputs]
    outputs = [TensorView(name=t.name, shape=list(t.shape), dtype=t.dtype) for t in task.outputs]
    return TaskDetail(**summary(task).model_dump(), prompt=prompt, prompt_error=why, inputs=inputs, outputs=outputs,
                      atol=task.tolerance.atol, rtol=task.tolerance.rtol, files=sorted(task.allowed_names),
                      new_files=[PurePosixPath(p).name for p in task.mnn.new_files])
