"""``mkb refine``: the paper's iterative baseline.  Per task, ``[generate] samples`` chains; each chain asks the
model (the task's prompt), evaluates the answer with the same pipeline and sandbox as ``mkb eval``, and answers
with the kit's feedback on it (:func:`kit.generate.feedback.feedback`), in one conversation, up to ``[refine]
turns`` answers.  Every answer is a sample of its own (sample id ``c<chain>.t<turn>``, method the model's name),
so best-of-k picks the best turn, as the paper scores iterative methods.

A run goes turn by turn: the answers of one turn for every live chain are asked concurrently, then evaluated
as one batch on the config's executor (local workers or Ray).  Everything is rebuilt from the run's files, so a
killed run resumes: the answers file holds every answer (:mod:`kit.generate.lines`), the run directory every
record, and a chain's conversation is its prompt, its answers and the feedback on their records.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from kit import candidates as kcand
from kit.generate.batch import answer_line, endpoint_of, failed_line, with_answers
from kit.generate.client import Endpoint, RequestFailed, Sampling
from kit.generate.feedback import feedback
from kit.generate.lines import AnswerLine, Appender, errors_path, read_answers
from kit.job.record import job_from
from kit.outline.evaluate import Executor, execute, executor_for, print_summary
from kit.results.records import Record, Status
from kit.results.shards import done_job_ids, read_records
from kit.run.rundir import prepare as prepare_run_dir
from kit.run.rundir import release as release_run_dir
from kit.settings.config import ConfigError, EvalConfig
from kit.suite.prompts import build_prompt
from kit.suite.tasks import Task, load_suite

log = logging.getLogger("kit")


def sample_id(chain: int, turn: int) -> str:
    """The sample id of a chain's answer at ``turn`` (1-based)."""
    return f"c{chain}.t{turn}"


@dataclass
class Chain:
    """One conversation: ``task``, its index ``chain``; ``prompt`` the task's initial prompt."""

    task: Task
    chain: int
    prompt: str

    def messages(self, turn: int, answers: dict[tuple[str, str], AnswerLine], records: dict[tuple[str, str], Record],
                 max_chars: int) -> list[dict[str, str]]:
        """The conversation sent for ``turn``: the prompt, then each earlier answer and the feedback on it."""
        out = [{"role": "user", "content": self.prompt}]
        for t in range(1, turn):
            key = (self.task.id, sample_id(self.chain, t))
            out += [{"role": "assistant", "content": answers[key].response},
                    {"role": "user", "content": feedback(records[key], self.task, max_chars)}]
        return out

    def state(self, turn: int, answers: dict, records: dict, cfg: EvalConfig) -> str:
        """``"ask"`` (the answer of ``turn`` is due), ``"evaluate"`` (answered, no record yet), ``"recorded"``
        (nothing left to do), ``"done"`` (the chain stopped before ``turn``), ``"wait"`` (an earlier turn has no answer or record yet: a failed
        request; a rerun goes on)."""
        ref = cfg.refine
        assert ref is not None
        tokens = 0
        for t in range(1, turn):
            key = (self.task.id, sample_id(self.chain, t))
            if key not in answers or key not in records:
                return "wait"
            rec = records[key]
            tokens += answers[key].generation.prompt_tokens + answers[key].generation.completion_tokens
            if rec.status == Status.OK and ref.stop_speedup is not None and (rec.speedup or 0.0) >= ref.stop_speedup:
                return "done"
        if ref.max_tokens_per_chain is not None and tokens >= ref.max_tokens_per_chain:
            return "done"
        key = (self.task.id, sample_id(self.chain, turn))
        if key in records:
            return "recorded"
        return "evaluate" if key in answers else "ask"


def refine(cfg: EvalConfig, executor: Executor | None = None) -> int:
    """``mkb refine``: every chain of every selected task, turn by turn (module docstring).  Returns 0, or 1
    when some chain waits on a request that got no answer (a rerun goes on).

    Raises:
        kit.settings.config.ConfigError: no ``[generate]`` or ``[refine]`` section, no MNN tree for the prompts.
        kit.generate.lines.GenerateError: the key's variable is unset, the answers file is damaged.
        what :func:`kit.outline.evaluate.execute` raises."""
    gen, ref = cfg.generate, cfg.refine
    if gen is None or ref is None:
        raise ConfigError("mkb refine needs a [generate] section (the model) and a [refine] section (turns, ...)")
    if cfg.mnn.source_dir is None:
        raise ConfigError("mnn.source_dir: the prompts quote MNN's headers from a tree; set it (or MKB_MNN__SOURCE_DIR)")
    cfg = with_answers(cfg)  # provenance's config names the answers: a bundle carries them, reproduce re-scores them
    tasks = load_suite(cfg.tasks.dir, cfg.tasks.split, cfg.tasks.ids or None)
    chains = [Chain(t, c, build_prompt(t, cfg.mnn.source_dir)) for t in tasks for c in range(gen.samples)]
    endpoint = endpoint_of(gen)
    run_dir = prepare_run_dir(cfg)
    started, waiting = time.monotonic(), False
    try:
        for turn in range(1, ref.turns + 1):
            if ref.max_wall_s is not None and time.monotonic() - started > ref.max_wall_s:
                log.warning("refine: refine.max_wall_s (%s s) passed before turn %d; a rerun goes on", ref.max_wall_s,
                            turn)
                break
            waiting |= _turn(cfg, chains, turn, endpoint, run_dir, executor or executor_for(cfg))
    finally:
        release_run_dir(run_dir)
    print_summary(read_records(run_dir), tasks, cfg)
    return 1 if waiting else 0


def _known(cfg: EvalConfig, run_dir: Path) -> tuple[dict, dict]:
    """The answers file's lines and the run's records of the refined method, by (task id, sample id)."""
    assert cfg.generate is not None
    method = cfg.generate.method_name()
    answers = {(a.task_id, a.sample_id): a for a in read_answers(cfg.generate.out_path(cfg.run.dir))}
    frame = read_records(run_dir)
    records = {}
    if frame.height:
        for row in frame.filter(frame["method"] == method).iter_rows(named=True):
            rec = Record.model_validate(row)
            records[(rec.task_id, rec.sample_id)] = rec
    return answers, records


def _turn(cfg: EvalConfig, chains: list[Chain], turn: int, endpoint: Endpoint, run_dir: Path,
          executor: Executor) -> bool:
    """Ask and evaluate ``turn`` of every live chain; True when a chain waits on a failed request."""
    assert cfg.generate is not None and cfg.refine is not None
    answers, records = _known(cfg, run_dir)
    states = {id(c): c.state(turn, answers, records, cfg) for c in chains}
    ask = [c for c in chains if states[id(c)] == "ask"]
    if ask:
        convo = {id(c): c.messages(turn, answers, records, cfg.refine.feedback_chars) for c in ask}
        asyncio.run(_ask(cfg, endpoint, ask, convo, turn))
        answers, records = _known(cfg, run_dir)
    method = cfg.generate.method_name()
    jobs = []
    for c in chains:
        key = (c.task.id, sample_id(c.chain, turn))
        if states[id(c)] in ("ask", "evaluate") and key in answers:
            cand = kcand.candidate_from_response(method, c.task, key[1], answers[key].response,
                                                 cfg.candidates.max_file_bytes, f"{cfg.generate.out_path(cfg.run.dir)}")
            jobs.append(job_from(cand, c.task, cfg.digest(), cfg.target_info()))
    if jobs:
        execute(jobs, done_job_ids(run_dir), run_dir, executor, label=f"refine turn {turn}")
    waiting = any(s == "wait" for s in states.values())
    return waiting or any(states[id(c)] == "ask" and (c.task.id, sample_id(c.chain, turn)) not in answers
                          for c in chains)


async def _ask(cfg: EvalConfig, endpoint: Endpoint, chains: list[Chain], convo: dict[int, list], turn: int) -> None:
    gen = cfg.generate
    assert gen is not None
    out = gen.out_path(cfg.run.dir)
    sampling = Sampling(gen.temperature, gen.top_p, gen.max_tokens, gen.seed)
    gate = asyncio.Semaphore(gen.concurrency)
    answers, errors = Appender(out), Appender(errors_path(out), truncate=turn == 1)

    async def one(c: Chain) -> None:
        messages = convo[id(c)]
        where = (c.task.id, sample_id(c.chain, turn))
        digest = hashlib.sha256(json.dumps(messages).encode()).hexdigest()
        async with gate:
            try:
                answers.add(answer_line(gen, endpoint, where, digest, await endpoint.ask(messages, sampling)))
            except RequestFailed as exc:
                errors.add(failed_line(gen, endpoint, where, digest, exc))

    try:
        await asyncio.gather(*(one(c) for c in chains))
    finally:
        answers.close()
        errors.close()
        await endpoint.close()
