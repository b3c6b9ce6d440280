"""Episodes of ``mkb serve``, gym-like: an episode is opened for one task (``POST /v1/episodes``); each step submits
a candidate for it (``POST /v1/episodes/{id}/steps``) and returns that check, with its verdict and reward once
done; the episode keeps its best step (highest reward; the first of equal ones).

Episodes live in the service's memory (a restart forgets them); their steps are ordinary checks, recorded in the
run directory like any other, with the sample id ``<episode id>-<step>``.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass, field

from kit.serve.models import CheckOptions, CheckView, EpisodeRequest, EpisodeView


class UnknownEpisode(Exception):
    """No episode of that id (or the service was restarted since it was opened)."""


@dataclass
class Episode:
    """One episode: its task, method and options, and the check ids of its steps in order."""

    id: str
    task_id: str
    method: str
    options: CheckOptions
    steps: list[str] = field(default_factory=list)
    #: steps begun (a step's sample id is taken before its check is accepted)
    begun: int = 0


def best(views: list[CheckView]) -> CheckView | None:
    """The finished step of highest reward (a null reward counts as none; the first of equal ones)."""
    done = [v for v in views if v.state == "done" and v.reward is not None]
    return max(done, key=lambda v: v.reward or 0.0, default=None)


class Episodes:
    """The open episodes, by id (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_id: dict[str, Episode] = {}

    def open(self, req: EpisodeRequest) -> Episode:
        """A new episode of ``req`` (its task already known to be served)."""
        ep = Episode(secrets.token_hex(8), req.task_id, req.method, req.options)
        with self._lock:
            self._by_id[ep.id] = ep
        return ep

    def get(self, episode_id: str) -> Episode:
        """Raises:
            UnknownEpisode: no such episode."""
        with self._lock:
            ep = self._by_id.get(episode_id)
        if ep is None:
            raise UnknownEpisode(f"no episode {episode_id!r} (episodes are forgotten when the service restarts)")
        return ep

    def begin_step(self, ep: Episode) -> str:
        """The sample id of ``ep``'s next step (``<episode id>-<n>``, n from 0; each taken once)."""
        with self._lock:
            ep.begun += 1
            return f"{ep.id}-{ep.begun - 1}"

    def add_step(self, ep: Episode, check_id: str) -> None:
        with self._lock:
            ep.steps.append(check_id)


def episode_view(ep: Episode, views: list[CheckView]) -> EpisodeView:
    """``ep`` with its steps as they are now (``views``, in step order) and its best step."""
    top = best(views)
    return EpisodeView(id=ep.id, task_id=ep.task_id, method=ep.method, timing=ep.options.timing,
                       steps=[v.id for v in views], best=top)
