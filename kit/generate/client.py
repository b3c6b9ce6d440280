"""One chat request to an OpenAI-compatible endpoint, classified: an answer (whatever its finish reason) or a
failure of the request itself.

The official ``openai`` client speaks to every provider the kit is pointed at (OpenAI, OpenRouter, DashScope,
DeepSeek, vLLM, SGLang, Ollama) through ``base_url``; its own retry loop (exponential backoff from 0.5 s to
8 s with jitter, ``Retry-After`` honoured) retries rate limits (429), server errors (5xx), 408/409, timeouts
and lost connections up to ``retries`` times.  This module only counts the attempts (an httpx request hook:
every attempt is one HTTP request) and classifies the end.  A truncated answer (``finish_reason = "length"``),
a refusal and an empty answer are answers: recorded as they are, never retried.
"""

from __future__ import annotations

import contextvars
import time
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

import openai

#: failure kinds of a request (a line of the errors file; the request is tried again on the next run)
RATE_LIMITED, SERVER_ERROR, TIMEOUT, CONNECTION, BAD_RESPONSE, REFUSED_REQUEST = (
    "rate_limited", "server_error", "timeout", "connection", "bad_response", "request_refused")


@dataclass(frozen=True)
class Sampling:
    """What the server is asked to sample with (None: the server's default)."""

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None

    def params(self) -> dict[str, Any]:
        """The request's sampling parameters, the unset ones left out."""
        raw = {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens, "seed": self.seed}
        return {k: v for k, v in raw.items() if v is not None}


@dataclass(frozen=True)
class Answer:
    """A model's answer: ``text`` ("" when empty or refused), ``finish_reason`` as the server gave it
    (``stop``, ``length``, ``content_filter``, ...; ``refusal`` when the message carries one), token counts
    (0 when the server reports none), ``latency_s`` from the first attempt's start to the answer, ``attempts``
    HTTP requests made."""

    text: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    attempts: int
    refusal: str = ""


class RequestFailed(Exception):
    """No answer: ``kind`` (:data:`RATE_LIMITED`, :data:`SERVER_ERROR`, :data:`TIMEOUT`, :data:`CONNECTION`,
    :data:`BAD_RESPONSE`, :data:`REFUSED_REQUEST`), ``message`` (the server's status and text, bounded),
    ``attempts`` made."""

    def __init__(self, kind: str, message: str, attempts: int, latency_s: float):
        super().__init__(f"{kind}: {message}")
        self.kind, self.message, self.attempts, self.latency_s = kind, message[:500], attempts, latency_s


@dataclass
class _Count:
    n: int = 0


_ATTEMPTS: contextvars.ContextVar[_Count] = contextvars.ContextVar("mkb_generate_attempts")


async def _count_request(_request: Any) -> None:
    counter = _ATTEMPTS.get(None)
    if counter is not None:
        counter.n += 1


def endpoint_host(base_url: str) -> str:
    """The host (and port) of ``base_url``, what a line and provenance name: never its path, query or credentials."""
    return urlsplit(base_url).netloc.rsplit("@", 1)[-1]


@dataclass
class Endpoint:
    """A model at an OpenAI-compatible endpoint.  ``api_key`` is held in memory only (never in a repr, a line
    or a log); ``timeout_s`` per attempt; ``retries`` further attempts by the client's backoff."""

    model: str
    base_url: str
    api_key: str = field(repr=False)
    timeout_s: float = 600.0
    retries: int = 4
    _client: openai.AsyncOpenAI | None = field(default=None, init=False, repr=False)

    @property
    def host(self) -> str:
        """:func:`endpoint_host` of this endpoint."""
        return endpoint_host(self.base_url)

    def client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            http = openai.DefaultAsyncHttpxClient(event_hooks={"request": [_count_request]})
            self._client = openai.AsyncOpenAI(base_url=self.base_url, api_key=self.api_key or "none",
                                              timeout=self.timeout_s, max_retries=self.retries, http_client=http)
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def ask(self, messages: list[dict[str, str]], sampling: Sampling) -> Answer:
        """Send one chat request (``messages``: role/content dicts) and wait for its answer.

        Raises:
            RequestFailed: no answer after the client's retries, or a request the server refuses (4xx other
                than 408/409/429: a wrong model name, a bad key), or a body that is not a chat completion."""
        counter = _Count()
        _ATTEMPTS.set(counter)
        t0 = time.monotonic()
        try:
            resp = await self.client().chat.completions.create(model=self.model, messages=messages,
                                                                **sampling.params())
        except openai.APIError as exc:
            raise RequestFailed(_kind(exc), self.scrub(_message(exc)), max(counter.n, 1),
                                time.monotonic() - t0) from None
        except ValueError as exc:  # a 200 whose body is not JSON (json's error) or not a completion (pydantic's)
            raise RequestFailed(BAD_RESPONSE, self.scrub(f"{type(exc).__name__}: {exc}"), max(counter.n, 1),
                                time.monotonic() - t0) from None
        answer = _answer(resp, time.monotonic() - t0, max(counter.n, 1))
        return replace(answer, text=self.scrub(answer.text), refusal=self.scrub(answer.refusal))

    def scrub(self, text: str) -> str:
        """``text`` with the API key masked (a server may echo the key it was sent in an error)."""
        return text.replace(self.api_key, "<api key>") if self.api_key else text


def _answer(resp: Any, latency_s: float, attempts: int) -> Answer:
    """The :class:`Answer` of a parsed chat completion.

    Raises:
        RequestFailed: BAD_RESPONSE when it has no choice or no message."""
    choices = getattr(resp, "choices", None) or []
    if not choices or getattr(choices[0], "message", None) is None:
        raise RequestFailed(BAD_RESPONSE, "the completion has no choice with a message", attempts, latency_s)
    choice = choices[0]
    msg = choice.message
    refusal = getattr(msg, "refusal", None) or ""
    usage = getattr(resp, "usage", None)
    reason = choice.finish_reason or ("refusal" if refusal else "unknown")
    return Answer(text=msg.content or "", finish_reason="refusal" if refusal and reason == "stop" else reason,
                  prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                  completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
                  latency_s=latency_s, attempts=attempts, refusal=refusal)


def _kind(exc: openai.APIError) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return TIMEOUT
    if isinstance(exc, openai.APIConnectionError):
        return CONNECTION
    if isinstance(exc, openai.RateLimitError):
        return RATE_LIMITED
    if isinstance(exc, openai.APIStatusError):
        return SERVER_ERROR if exc.status_code >= 500 or exc.status_code in (408, 409) else REFUSED_REQUEST
    return BAD_RESPONSE  # a body that is not JSON or not a chat completion


def _message(exc: openai.APIError) -> str:
    status = getattr(exc, "status_code", None)
    text = str(getattr(exc, "message", "") or exc)
    return f"HTTP {status}: {text}" if status is not None else text
