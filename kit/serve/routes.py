"""The routes of ``mkb serve`` (prefix ``/v1``): checks, tasks, health and statistics.  Each route reads the
engine from the app (:func:`kit.serve.app.create_app`) and maps the engine's refusals to HTTP statuses: an
unknown task or check 404, a reused sample id 409, a full queue 429 with ``Retry-After``."""

from __future__ import annotations

import asyncio
import time

from fastapi import APIRouter, HTTPException, Query, Request, Response

from kit.serve.checks import QueueFull, SampleConflict
from kit.serve.engine import Engine, UnknownTask
from kit.serve.models import CheckRequest, CheckView, ErrorBody, Health, Stats, TaskDetail, TaskSummary
from kit.serve.tasks import detail, summary

#: the longest ``?wait=`` (seconds) a GET of a check may block
MAX_WAIT_S = 600.0
#: how often a blocking GET looks at its check (seconds)
POLL_S = 0.05

router = APIRouter(prefix="/v1")
_ERRORS = {code: {"model": ErrorBody} for code in (401, 404, 409, 411, 413, 429)}


def _engine(request: Request) -> Engine:
    return request.app.state.engine


@router.get("/health", response_model=Health)
def health() -> Health:
    """The service is up (no token needed)."""
    return Health()


@router.get("/stats", response_model=Stats, responses=_ERRORS)
def stats(request: Request) -> Stats:
    """Queue depth, workers, verdicts per minute, p50/p95 seconds from acceptance to verdict."""
    return _engine(request).stats()


@router.post("/checks", response_model=CheckView, status_code=202, responses=_ERRORS)
def submit(body: CheckRequest, request: Request, response: Response) -> CheckView:
    """Accept a check: 202 with its id and state (``done`` at once for a candidate refused before any build and
    for an identical earlier submission, ``cached``)."""
    try:
        return _engine(request).submit(body)
    except UnknownTask as exc:
        raise HTTPException(404, str(exc)) from None
    except SampleConflict as exc:
        raise HTTPException(409, str(exc)) from None
    except QueueFull as exc:
        raise HTTPException(429, str(exc), headers={"Retry-After": str(exc.retry_after_s)}) from None


@router.get("/checks/{check_id}", response_model=CheckView, responses=_ERRORS)
async def get_check(check_id: str, request: Request,
                    wait: float = Query(0.0, ge=0.0, le=MAX_WAIT_S,
                                        description="block up to this many seconds for the verdict")) -> CheckView:
    """A check: ``queued`` (its place), ``running`` (its stage) or ``done`` with the verdict and reward."""
    engine = _engine(request)
    deadline = time.monotonic() + wait
    while True:
        view = engine.view(check_id)
        if view is None:
            raise HTTPException(404, f"no check {check_id!r}")
        left = deadline - time.monotonic()
        if view.state == "done" or left <= 0:
            return view
        await asyncio.sleep(min(POLL_S, left))


@router.get("/tasks", response_model=list[TaskSummary], responses=_ERRORS)
def tasks(request: Request) -> list[TaskSummary]:
    """The tasks served (the config's task selection)."""
    return [summary(t) for t in _engine(request).tasks.values()]


@router.get("/tasks/{task_id}", response_model=TaskDetail, responses=_ERRORS)
def task(task_id: str, request: Request) -> TaskDetail:
    """A task as a model may see it: its prompt and spec (never the verification seeds nor references)."""
    engine = _engine(request)
    t = engine.tasks.get(task_id)
    if t is None:
        raise HTTPException(404, f"unknown task {task_id!r}")
    return detail(t, engine.mnn_root)
