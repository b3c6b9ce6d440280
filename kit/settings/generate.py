"""The ``[generate]`` section: which model answers the tasks' prompts, at which OpenAI-compatible endpoint, with
which sampling settings, and where the answers go (:mod:`kit.generate`)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from kit.settings.base import Section

#: characters a method name may hold (:class:`kit.settings.sections.CandidateSource`)
_METHOD_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]+")


class GenerateSection(Section):
    """A model's answers to the tasks' initial prompts (docs/generate.md).

    The API key is never a value of the config: ``api_key_env`` names the environment variable it is read from
    when the requests start (empty: servers that need none, a local vLLM or Ollama).  ``samples`` answers per
    task (the k of pass@k; sample ids ``0`` .. ``k-1``); ``temperature``, ``top_p``, ``max_tokens`` and ``seed``
    go to the server as given (None: the server's default; ``seed`` only where the server takes one);
    ``concurrency`` requests in flight at once; ``timeout_s`` seconds per request attempt; ``retries`` further
    attempts of a request after a rate limit (429), a server error (5xx), a timeout or a lost connection,
    with the client's exponential backoff (``Retry-After`` honoured).  ``out``: the JSONL file written (None:
    ``<run.dir>/generated/<method>.jsonl``); ``method``: the candidate source's method name (None: the model's
    name, with characters outside ``[A-Za-z0-9_.-]`` as ``-``).  ``price_in_per_mtok`` / ``price_out_per_mtok``:
    USD per million prompt / completion tokens, for the cost estimate (None: tokens only)."""

    model: str = Field(min_length=1)
    base_url: str = "https://api.openai.com/v1"
    api_key_env: str = "OPENAI_API_KEY"
    samples: int = Field(default=1, ge=1, le=1000)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    max_tokens: int | None = Field(default=8192, ge=1)
    seed: int | None = None
    concurrency: int = Field(default=4, ge=1, le=256)
    timeout_s: float = Field(default=600.0, gt=0)
    retries: int = Field(default=4, ge=0, le=20)
    out: Path | None = None
    method: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.\-]+$")
    price_in_per_mtok: float | None = Field(default=None, ge=0)
    price_out_per_mtok: float | None = Field(default=None, ge=0)

    @field_validator("base_url")
    @classmethod
    def _http(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        if "@" in urlsplit(v).netloc:  # a URL is copied into provenance and bundles: credentials never go there
            raise ValueError("must not hold credentials (user:password@); give the key through api_key_env")
        return v

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, v: str) -> str:
        if v and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v):
            raise ValueError("must be the name of an environment variable (the key itself never goes into a config)")
        return v

    def method_name(self) -> str:
        """The method the answers are evaluated as: ``method``, else the model's name made safe."""
        return self.method or (_METHOD_UNSAFE.sub("-", self.model).strip("-.") or "model")

    def out_path(self, run_dir: Path) -> Path:
        """The JSONL file of the answers (``out``, else under ``run_dir``)."""
        return self.out if self.out is not None else run_dir / "generated" / f"{self.method_name()}.jsonl"


class RefineSection(Section):
    """Iterative refinement (``mkb refine``, docs/generate.md): each of the ``[generate]`` section's ``samples``
    chains per task asks the model, evaluates its answer, and answers with the kit's feedback, up to ``turns``
    answers.  A chain stops early once an answer is ``ok`` with a speedup >= ``stop_speedup`` (None: never
    early), or once its answers used ``max_tokens_per_chain`` tokens (prompt + completion, None: no bound).
    ``max_wall_s``: seconds after which no further turn starts (None: no bound; a rerun goes on).
    ``feedback_chars``: the longest feedback message (characters; longer diagnostics are cut with a note)."""

    turns: int = Field(default=3, ge=1, le=50)
    stop_speedup: float | None = Field(default=1.0, ge=0)
    max_tokens_per_chain: int | None = Field(default=None, ge=1)
    max_wall_s: float | None = Field(default=None, gt=0)
    feedback_chars: int = Field(default=4000, ge=200, le=100_000)
