"""The request and response bodies of ``mkb serve`` (pydantic models: they validate what comes in, name the field
that is wrong in a 422, and make the OpenAPI schema the service serves at ``/v1/openapi.json``).

Nothing here names a path on the server: a candidate travels as its files' text or as a raw response.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kit.candidates import NATIVE_METHOD, SAMPLE_ID_RE

#: a method name, as a candidate source's in a config (:class:`kit.settings.sections.CandidateSource`)
METHOD_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")
#: the states of a check: waiting for a worker, in a worker (``stage`` says where), finished (a verdict)
State = Literal["queued", "running", "done"]


class Strict(BaseModel):
    """Unknown fields are refused (a typo in an option is a 422, not silently ignored)."""

    model_config = ConfigDict(extra="forbid")


class CheckOptions(Strict):
    """How a check is run.  ``timing``: false checks correctness only (register, build, verify: no timing
    stage), as the config with ``timing.enabled = false`` does; its records go to a run directory of their own
    (``<run.dir>-no-timing``), since they are of another config digest."""

    timing: bool = True


def method_name(v: str) -> str:
    """``v`` if it may name a method (as a configured source's: letters, digits, ``_.-``; not ``native``, the
    kit's own kernels).

    Raises:
        ValueError: it may not."""
    if not METHOD_RE.match(v) or v == NATIVE_METHOD:
        raise ValueError(f"letters, digits and _.- only, and not {NATIVE_METHOD!r} (the kit's own kernels)")
    return v


class CheckRequest(Strict):
    """``POST /v1/checks``: one candidate for one task, as ``files`` (basename → UTF-8 text; the names the
    task allows) or as ``response`` (a raw model answer, code blocks whose first line names the file), not both.
    ``method`` names who wrote it (the record's ``method``); ``sample_id`` (optional; default: the first 16
    hex digits of the input's sha256) identifies the sample within the method and task: one sample id, one
    candidate."""

    task_id: str = Field(min_length=1, max_length=200)
    files: dict[str, str] | None = None
    response: str | None = None
    method: str = Field(default="serve", min_length=1, max_length=100)
    sample_id: str | None = None
    options: CheckOptions = CheckOptions()

    @field_validator("method")
    @classmethod
    def _method(cls, v: str) -> str:
        return method_name(v)

    @field_validator("sample_id")
    @classmethod
    def _sample(cls, v: str | None) -> str | None:
        if v is not None and not SAMPLE_ID_RE.match(v):
            raise ValueError("1 to 128 letters, digits and _.- only")
        return v

    @model_validator(mode="after")
    def _one_input(self) -> CheckRequest:
        if (self.files is None) == (self.response is None):
            raise ValueError("give exactly one of files or response")
        return self


class EpisodeRequest(Strict):
    """``POST /v1/episodes``: an episode of steps for one task, each step a check of ``method`` with
    ``options``."""

    task_id: str = Field(min_length=1, max_length=200)
    method: str = Field(default="episode", min_length=1, max_length=100)
    options: CheckOptions = CheckOptions()

    @field_validator("method")
    @classmethod
    def _method(cls, v: str) -> str:
        return method_name(v)


class StepRequest(Strict):
    """``POST /v1/episodes/{id}/steps``: the step's candidate, as ``files`` or ``response`` (not both)."""

    files: dict[str, str] | None = None
    response: str | None = None

    @model_validator(mode="after")
    def _one_input(self) -> StepRequest:
        if (self.files is None) == (self.response is None):
            raise ValueError("give exactly one of files or response")
        return self


class CheckView(Strict):
    """A check as the service knows it.  ``id``: the job id (task, method, sample, candidate sha256 and config
    digest hashed; 24 hex digits).  ``stage``: while running, the pipeline stage (``build``, ``verify``,
    ``time``); ``ended_in``: once done, the stage the verdict ended in (``screen``, ``build``, ``verify``,
    ``time``, or ``setup`` for a harness error before any stage).  ``verdict``: what ``mkb check`` prints for
    the record.  ``reward``: the scalar reward of the verdict (docs/serve.md; null for a harness error).
    ``cached``: this answer is of an earlier identical submission.  ``queue_position``: checks before it."""

    id: str
    task_id: str
    method: str
    sample_id: str
    timing: bool
    state: State
    stage: str = ""
    queue_position: int | None = None
    cached: bool = False
    ended_in: str = ""
    status: str = ""
    reward: float | None = None
    verdict: dict[str, Any] | None = None


class EpisodeView(Strict):
    """An episode: its task, method, whether its steps are timed, its steps' check ids in order, and its best
    step so far (highest reward; null before a step has one)."""

    id: str
    task_id: str
    method: str
    timing: bool
    steps: list[str]
    best: CheckView | None = None


class TensorView(Strict):
    """One input or output of a task: name, shape, dtype; for an input how its values are drawn (the seeds
    are not given)."""

    name: str
    shape: list[int]
    dtype: str
    distribution: str | None = None
    low: float | None = None
    high: float | None = None


class TaskSummary(Strict):
    """A task the service accepts checks for."""

    id: str
    category: str
    op_type: str
    mechanism: str
    split: str
    description: str


class TaskDetail(TaskSummary):
    """A task as a model may see it: its prompt (the kit's initial prompt, null with ``prompt_error`` when the
    MNN tree lacks a file it quotes), inputs, outputs, tolerance, and the file names a candidate may use
    (``files``: replaceable basenames; ``new_files``: patterns of files it may add).  Never the verification
    seeds nor reference outputs."""

    prompt: str | None
    prompt_error: str = ""
    inputs: list[TensorView]
    outputs: list[TensorView]
    atol: float
    rtol: float
    files: list[str]
    new_files: list[str]


class Health(Strict):
    """``GET /v1/health``: the service is up (no token needed; it says nothing about checks)."""

    status: Literal["ok"] = "ok"


class Stats(Strict):
    """``GET /v1/stats``: ``queue_depth`` checks waiting (of ``queue_limit``), ``running``, ``workers``;
    ``done`` verdicts this session (``cache_hits`` answered from earlier ones); ``verdicts_per_min`` over the
    last minute; ``time_to_verdict_p50_s``/``_p95_s``: seconds from acceptance to verdict of this session's
    checks (null before the first)."""

    queue_depth: int
    queue_limit: int
    running: int
    workers: int
    done: int
    cache_hits: int
    verdicts_per_min: float
    time_to_verdict_p50_s: float | None
    time_to_verdict_p95_s: float | None


class ErrorBody(Strict):
    """The body of a 401, 404, 409, 411, 413, 429 or 503: what was refused and why."""

    detail: str
