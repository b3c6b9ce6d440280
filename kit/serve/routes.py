"""The routes of ``mkb serve`` (prefix ``/v1``): checks, episodes, tasks, health and statistics.  Each route reads the
engine from the app (:func:`kit.serve.app.create_app`) and maps the engine's refusals to HTTP statuses: an
unknown task, check or episode 404, a reused sample id 409, a full queue 429 with ``Retry-After``."""

from __future__ import annotations

import asyncio
import time

from fastapi import APIRouter, HTTPException, Query, Request
from starlette.concurrency import run_in_threadpool

from kit.serve.checks import QueueFull, SampleConflict
from kit.serve.engine import Engine, UnknownTask
from kit.serve.episodes import Episode, UnknownEpisode, episode_view
from kit.serve.models import (
    CheckRequest,
    CheckView,
    EpisodeRequest,
    EpisodeView,
    ErrorBody,
    Health,
    Stats,
    StepRequest,
    TaskDetail,
    TaskSummary,
)
from kit.serve.tasks import detail, summary
from kit.settings.config import ConfigError

#: the longest ``?wait=`` (seconds) a GET of a check may block
MAX_WAIT_S = 600.0
#: how often a blocking GET looks at its check (seconds)
POLL_S = 0.05

router = APIRouter(prefix="/v1")
_ERRORS = {code: {"model": ErrorBody} for code in (401, 404, 409, 411, 413, 429, 503)}


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
def submit(body: CheckRequest, request: Request) -> CheckView:
    """Accept a check: 202 with its id and state (``done`` at once for a candidate refused before any build and
    for an identical earlier submission, ``cached``)."""
    return _submit(_engine(request), body)


def _submit(engine: Engine, req: CheckRequest) -> CheckView:
    """``engine.submit(req)``, its refusals as HTTP errors."""
    try:
        return engine.submit(req)
    except UnknownTask as exc:
        raise HTTPException(404, str(exc)) from None
    except SampleConflict as exc:
        raise HTTPException(409, str(exc)) from None
    except QueueFull as exc:
        raise HTTPException(429, str(exc), headers={"Retry-After": str(exc.retry_after_s)}) from None
    except ConfigError as exc:  # the correctness-only run directory cannot be opened (another config's, in use)
        raise HTTPException(503, f"the service cannot take this check: {exc}") from None


async def _awaited(engine: Engine, check_id: str, wait_s: float) -> CheckView:
    """The check ``check_id`` once done, or as it is after ``wait_s`` seconds.

    Raises:
        HTTPException: 404, no such check."""
    deadline = time.monotonic() + wait_s
    while True:
        view = engine.view(check_id)
        if view is None:
            raise HTTPException(404, f"no check {check_id!r}")
        left = deadline - time.monotonic()
        if view.state == "done" or left <= 0:
            return view
        await asyncio.sleep(min(POLL_S, left))


_WAIT = Query(0.0, ge=0.0, le=MAX_WAIT_S, description="block up to this many seconds for the verdict")


@router.get("/checks/{check_id}", response_model=CheckView, responses=_ERRORS)
async def get_check(check_id: str, request: Request, wait: float = _WAIT) -> CheckView:
    """A check: ``queued`` (its place), ``running`` (its stage) or ``done`` with the verdict and reward."""
    return await _awaited(_engine(request), check_id, wait)


@router.post("/episodes", response_model=EpisodeView, status_code=201, responses=_ERRORS)
def open_episode(body: EpisodeRequest, request: Request) -> EpisodeView:
    """Open an episode for a task: its steps are checks of that task; it keeps the best."""
    if body.task_id not in _engine(request).tasks:
        raise HTTPException(404, f"task_id: unknown task {body.task_id!r} (GET /v1/tasks lists the tasks served)")
    return episode_view(request.app.state.episodes.open(body), [])


def _episode(request: Request, episode_id: str) -> Episode:
    try:
        return request.app.state.episodes.get(episode_id)
    except UnknownEpisode as exc:
        raise HTTPException(404, str(exc)) from None


@router.post("/episodes/{episode_id}/steps", response_model=CheckView, status_code=202, responses=_ERRORS)
async def step(episode_id: str, body: StepRequest, request: Request, wait: float = _WAIT) -> CheckView:
    """One step: the candidate checked for the episode's task; with ``wait``, its verdict and reward."""
    engine, episodes = _engine(request), request.app.state.episodes
    ep = _episode(request, episode_id)
    req = CheckRequest(task_id=ep.task_id, files=body.files, response=body.response, method=ep.method,
                       sample_id=episodes.begin_step(ep), options=ep.options)
    view = await run_in_threadpool(_submit, engine, req)
    episodes.add_step(ep, view.id)
    return view if view.state == "done" else await _awaited(engine, view.id, wait)


@router.get("/episodes/{episode_id}", response_model=EpisodeView, responses=_ERRORS)
def get_episode(episode_id: str, request: Request) -> EpisodeView:
    """An episode: its steps' check ids and its best step so far."""
    ep = _episode(request, episode_id)
    engine = _engine(request)
    return episode_view(ep, [v for i in list(ep.steps) if (v := engine.view(i)) is not None])


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
