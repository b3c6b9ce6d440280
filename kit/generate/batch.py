"""``mkb generate``: ask the configured model for every sample the answers file lacks, ``concurrency`` requests
at a time, and append each answer as it comes (:mod:`kit.generate.lines`).

Per task the model sees one user message, the task's initial prompt (:func:`kit.suite.prompts.build_prompt`,
the paper's prompt); every sample of a task is an independent request with the same prompt.  The progress bar
counts samples, tokens and, with prices in the config, the estimated cost in USD.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from kit.generate.client import Answer, Endpoint, RequestFailed, Sampling, endpoint_host
from kit.generate.lines import (
    AnswerLine,
    Appender,
    FailedLine,
    GenerateError,
    Generation,
    answered,
    errors_path,
    read_answers,
)
from kit.host.progress import job_progress
from kit.settings.config import CandidateSource, EvalConfig
from kit.settings.generate import GenerateSection
from kit.suite.prompts import build_prompt
from kit.suite.tasks import Task, load_suite

log = logging.getLogger("kit")


@dataclass
class GenerateSummary:
    """What one ``mkb generate`` did: samples ``asked`` this run, ``answered`` of them, ``failed`` (in the errors
    file), ``skipped`` (already in the answers file); ``truncated`` answers (finish reason ``length``) and
    ``refused`` ones among the answered; tokens and estimated cost (None without prices) of this run."""

    out: Path
    errors: Path
    asked: int = 0
    answered: int = 0
    failed: int = 0
    skipped: int = 0
    truncated: int = 0
    refused: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    failures: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        """One line for the terminal."""
        cost = f", about ${self.cost_usd:.4f}" if self.cost_usd is not None else ""
        parts = [f"{self.answered}/{self.asked} answered", f"{self.skipped} already there"]
        if self.failed:
            parts.append(f"{self.failed} failed ({', '.join(f'{k} {n}' for k, n in sorted(self.failures.items()))}; "
                         f"see {self.errors}, a rerun asks again)")
        if self.truncated or self.refused:
            parts.append(f"{self.truncated} truncated, {self.refused} refused")
        return (f"generate: {', '.join(parts)}; tokens {self.prompt_tokens} in, {self.completion_tokens} out{cost} "
                f"-> {self.out}")


@dataclass(frozen=True)
class _Request:
    task: Task
    sample_id: str
    prompt: str
    prompt_sha256: str


def endpoint_of(gen: GenerateSection) -> Endpoint:
    """The endpoint of ``gen``, its key read from ``gen.api_key_env`` now.

    Raises:
        GenerateError: ``api_key_env`` names a variable that is not set (or empty)."""
    key = ""
    if gen.api_key_env:
        key = os.environ.get(gen.api_key_env, "")
        if not key:
            raise GenerateError(f"generate.api_key_env: the environment variable {gen.api_key_env} is not set (the "
                                "API key is read from it; set api_key_env = \"\" for a server that needs none)")
    return Endpoint(gen.model, gen.base_url, key, timeout_s=gen.timeout_s, retries=gen.retries)


def pending(gen: GenerateSection, tasks: list[Task], mnn_root: Path, done: set[tuple[str, str]]) -> list[_Request]:
    """The requests still to make: every sample of every task that ``done`` lacks, tasks in suite order.

    Raises:
        kit.suite.prompts.PromptError: a task's prompt cannot be built from ``mnn_root``."""
    out: list[_Request] = []
    for task in tasks:
        todo = [str(i) for i in range(gen.samples) if (task.id, str(i)) not in done]
        if not todo:
            continue
        prompt = build_prompt(task, mnn_root)
        digest = hashlib.sha256(prompt.encode()).hexdigest()
        out += [_Request(task, sid, prompt, digest) for sid in todo]
    return out


def generate(cfg: EvalConfig, progress: bool = True) -> GenerateSummary:
    """Ask the model of ``cfg.generate`` for every missing sample of the configured tasks.

    Raises:
        GenerateError: no ``[generate]`` section, no MNN tree for the prompts, the key's variable unset, a
            damaged answers file.
        kit.suite.prompts.PromptError: a prompt cannot be built."""
    gen = cfg.generate
    if gen is None:
        raise GenerateError("generate: the config has no [generate] section (model, base_url, api_key_env, ...)")
    if cfg.mnn.source_dir is None:
        raise GenerateError("mnn.source_dir: the prompts quote MNN's headers from a tree; set it "
                            "(or MKB_MNN__SOURCE_DIR)")
    out = gen.out_path(cfg.run.dir)
    tasks = load_suite(cfg.tasks.dir, cfg.tasks.split, cfg.tasks.ids or None)
    done = answered(out)
    todo = pending(gen, tasks, cfg.mnn.source_dir, done)
    endpoint = endpoint_of(gen)
    summary = GenerateSummary(out=out, errors=errors_path(out), asked=len(todo),
                              skipped=sum(1 for t in tasks for i in range(gen.samples) if (t.id, str(i)) in done))
    answers, errors = Appender(out), Appender(summary.errors, truncate=True)
    try:
        asyncio.run(_ask_all(gen, endpoint, todo, _Sinks(answers, errors, summary), progress))
    finally:
        answers.close()
        errors.close()
    summary.cost_usd = cost_usd(gen, summary.prompt_tokens, summary.completion_tokens)
    return summary


def cost_usd(gen: GenerateSection, prompt_tokens: int, completion_tokens: int) -> float | None:
    """The estimated cost in USD of the tokens at the config's prices per million (None: no prices given)."""
    if gen.price_in_per_mtok is None and gen.price_out_per_mtok is None:
        return None
    return (prompt_tokens * (gen.price_in_per_mtok or 0.0) + completion_tokens * (gen.price_out_per_mtok or 0.0)) / 1e6


@dataclass
class _Sinks:
    answers: Appender
    errors: Appender
    summary: GenerateSummary


async def _ask_all(gen: GenerateSection, endpoint: Endpoint, todo: list[_Request], sinks: _Sinks,
                   progress: bool) -> None:
    sampling = Sampling(gen.temperature, gen.top_p, gen.max_tokens, gen.seed)
    gate = asyncio.Semaphore(gen.concurrency)
    bar = job_progress() if progress and todo else None
    tid = bar.add_task(f"generate {gen.model}", total=len(todo), status="") if bar is not None else None

    async def one(req: _Request) -> None:
        async with gate:
            try:
                answer = await endpoint.ask([{"role": "user", "content": req.prompt}], sampling)
            except RequestFailed as exc:
                _failed(sinks, gen, endpoint, req, exc)
            else:
                _answered(sinks, gen, endpoint, req, answer)
        if bar is not None and tid is not None:
            bar.update(tid, advance=1, status=_tokens_text(sinks.summary, gen))

    try:
        if bar is not None:
            bar.start()
        await asyncio.gather(*(one(r) for r in todo))
    finally:
        if bar is not None:
            bar.stop()
        await endpoint.close()


def answer_line(gen: GenerateSection, endpoint: Endpoint, where: tuple[str, str], prompt_sha256: str,
                answer: Answer) -> AnswerLine:
    """The answers file's line of ``answer`` to the sample ``where`` (task id, sample id), whose request's
    messages hash to ``prompt_sha256``."""
    sampling = Sampling(gen.temperature, gen.top_p, gen.max_tokens, gen.seed)
    meta = Generation(model=gen.model, endpoint_host=endpoint.host, temperature=sampling.temperature,
                      top_p=sampling.top_p, max_tokens=sampling.max_tokens, seed=sampling.seed,
                      prompt_sha256=prompt_sha256, finish_reason=answer.finish_reason, refusal=answer.refusal,
                      prompt_tokens=answer.prompt_tokens, completion_tokens=answer.completion_tokens,
                      latency_s=round(answer.latency_s, 3), attempts=answer.attempts)
    return AnswerLine(task_id=where[0], sample_id=where[1], response=answer.text, generation=meta)


def failed_line(gen: GenerateSection, endpoint: Endpoint, where: tuple[str, str], prompt_sha256: str,
                exc: RequestFailed) -> FailedLine:
    """The errors file's line of a request for the sample ``where`` that got no answer."""
    return FailedLine(task_id=where[0], sample_id=where[1], kind=exc.kind, message=exc.message, attempts=exc.attempts,
                      latency_s=round(exc.latency_s, 3), model=gen.model, endpoint_host=endpoint.host,
                      prompt_sha256=prompt_sha256)


def _answered(sinks: _Sinks, gen: GenerateSection, endpoint: Endpoint, req: _Request, answer: Answer) -> None:
    sinks.answers.add(answer_line(gen, endpoint, (req.task.id, req.sample_id), req.prompt_sha256, answer))
    s = sinks.summary
    s.answered += 1
    s.truncated += answer.finish_reason == "length"
    s.refused += bool(answer.refusal) or answer.finish_reason in ("content_filter", "refusal")
    s.prompt_tokens += answer.prompt_tokens
    s.completion_tokens += answer.completion_tokens


def _failed(sinks: _Sinks, gen: GenerateSection, endpoint: Endpoint, req: _Request, exc: RequestFailed) -> None:
    sinks.errors.add(failed_line(gen, endpoint, (req.task.id, req.sample_id), req.prompt_sha256, exc))
    s = sinks.summary
    s.failed += 1
    s.failures[exc.kind] = s.failures.get(exc.kind, 0) + 1
    log.warning("generate: %s sample %s: %s after %d attempt(s)", req.task.id, req.sample_id, exc.kind, exc.attempts)


def _tokens_text(s: GenerateSummary, gen: GenerateSection) -> str:
    text = f"tokens {s.prompt_tokens} in / {s.completion_tokens} out"
    if (cost := cost_usd(gen, s.prompt_tokens, s.completion_tokens)) is not None:
        text += f", ${cost:.4f}"
    if s.failed:
        text += f", {s.failed} failed"
    return text


def with_answers(cfg: EvalConfig) -> EvalConfig:
    """``cfg`` with the answers file of its ``[generate]`` section as one more candidate source (method:
    :meth:`kit.settings.generate.GenerateSection.method_name`), unless a source already reads that file.

    Raises:
        GenerateError: another source already has that method name."""
    gen = cfg.generate
    if gen is None:
        return cfg
    out, method = gen.out_path(cfg.run.dir), gen.method_name()
    sources = list(cfg.candidates.sources)
    if any(s.path == out for s in sources):
        return cfg
    if any(s.method == method for s in sources):
        raise GenerateError(f"generate.method: {method!r} is already the method of a candidates.sources entry; "
                            "set generate.method to another name")
    sources.append(CandidateSource(method=method, path=out))
    return cfg.model_copy(update={"candidates": cfg.candidates.model_copy(update={"sources": sources})})


def generation_facts(cfg: EvalConfig) -> dict[str, object] | None:
    """What provenance says of the model's answers (:class:`kit.run.provenance_model.GenerationFacts`): the
    section's model, endpoint host and sampling settings, and from the answers file its lines, token totals,
    finish reasons and a digest of its prompts; None without a ``[generate]`` section.

    Raises:
        GenerateError: the answers file is damaged."""
    gen = cfg.generate
    if gen is None:
        return None
    out = gen.out_path(cfg.run.dir)
    lines = read_answers(out)
    reasons: dict[str, int] = {}
    for line in lines:
        reasons[line.generation.finish_reason] = reasons.get(line.generation.finish_reason, 0) + 1
    prompts = sorted({line.generation.prompt_sha256 for line in lines})
    return {"model": gen.model, "endpoint_host": endpoint_host(gen.base_url), "method": gen.method_name(),
            "samples": gen.samples, "temperature": gen.temperature, "top_p": gen.top_p, "max_tokens": gen.max_tokens,
            "seed": gen.seed, "answers": len(lines),
            "prompt_tokens": sum(x.generation.prompt_tokens for x in lines),
            "completion_tokens": sum(x.generation.completion_tokens for x in lines),
            "prompts_sha256": hashlib.sha256("\n".join(prompts).encode()).hexdigest(), "finish_reasons": reasons}
