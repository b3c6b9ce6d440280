"""``mkb generate`` against a scripted OpenAI-compatible server on loopback (kit/bench/chatserver.py), through the real
``openai`` client: every request ends as one classified line, none lost and none doubled on a rerun, the key
reaches the server and nothing else; then the answers are a candidate source ``mkb eval`` scores (fixture engine)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest
from conftest_fixture import FIXTURE_ROOT, copy_fixture_engine

from kit.bench.chatserver import Act, StubServer, answer
from kit.cli import main
from kit.generate.lines import GenerateError, answered, errors_path
from kit.report.data import load_provenance
from kit.results.shards import read_records
from kit.settings.config import ConfigError, load_config
from kit.suite.prompts import headers_for
from kit.suite.tasks import load_suite

KEY = "sk-canary-4f1e9b0c-never-in-a-file"
SAMPLES = ("compile_error", "correct", "crash", "wrong_result")  # sample ids 0..3 of each task, in this order
STATUS_OF = {"compile_error": "compile_error", "correct": "ok", "crash": "runtime_crash",
             "wrong_result": "verify_mismatch"}


@pytest.fixture(scope="module")
def engine(tmp_path_factory) -> Path:
    """The fixture engine with the MNN headers the prompts quote (small files of our own; the engine's build
    does not use them); its kit cache (``cache`` beside it) is shared by the module's tests: one native build."""
    root = copy_fixture_engine(tmp_path_factory.mktemp("gen") / "engine")
    for task in load_suite(FIXTURE_ROOT / "tasks", "all", None):
        for rel in headers_for(task):
            p = root / rel
            if not p.exists():
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(f"// {p.name}: a stand-in header for the prompt\n#pragma once\n")
    return root


def _op_of(prompt: str) -> str:
    m = re.search(r"Implement the ONNX operator `(\w+)`", prompt)
    assert m, prompt[:300]
    return m.group(1)


def _config(tmp_path: Path, engine: Path, base_url: str, **gen) -> Path:
    keys = {"model": "stub-model", "base_url": base_url, "api_key_env": "MKB_TEST_KEY", "samples": 2,
            "concurrency": 4, "timeout_s": 5.0, "retries": 2, **gen}
    lines = [f'{k} = {json.dumps(v)}' for k, v in keys.items()]
    text = f"""
[run]
dir = "{tmp_path / 'run'}"
[tasks]
dir = "{FIXTURE_ROOT / 'tasks'}"
split = "all"
[mnn]
engine = "fixture"
source_dir = "{engine}"
cache_dir = "{engine.parent / 'cache'}"
[dispatch]
mode = "serial"
[report]
enabled = false
[generate]
""" + "\n".join(lines) + "\n"
    path = tmp_path / "cfg.toml"
    path.write_text(text)
    return path


def _read(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


#: per ONNX op of the fixture suite, what the server does with attempt n of a prompt
BEHAVIOUR = {
    "ArgMax": lambda n: Act("status", status=429, retry_after=0.05) if n == 1 else answer("ok after 429"),
    "Exp": lambda n: answer("cut " * 50, finish="length") if n == 1 else answer(""),
    "Sub": lambda n: Act("status", status=500),
    "Transpose": lambda n: Act("malformed"),
}


def test_every_request_ends_as_one_classified_line_and_a_rerun_asks_only_what_is_missing(tmp_path, engine, monkeypatch,
                                                                                       capsys):
    monkeypatch.setenv("MKB_TEST_KEY", KEY)
    with StubServer(lambda prompt, n: BEHAVIOUR[_op_of(prompt)](n)) as server:
        cfg = _config(tmp_path, engine, server.base_url, seed=7, temperature=0.2,
                      price_in_per_mtok=1.0, price_out_per_mtok=2.0)
        assert main(["generate", "--config", str(cfg)]) == 1  # some requests got no answer
        first = len(server.requests)
        out = tmp_path / "run" / "generated" / "stub-model.jsonl"
        lines, errors = _read(out), _read(errors_path(out))
        by = {(x["task_id"], x["sample_id"]): x for x in lines}
        # ArgMax: the prompt's first request gets a 429 (Retry-After honoured), then an answer: 2 attempts for
        # that sample, 1 for the other
        assert {by[("fx_argmax", s)]["response"] for s in "01"} == {"ok after 429"}
        assert sorted(by[("fx_argmax", s)]["generation"]["attempts"] for s in "01") == [1, 2]
        # Exp: a truncated answer and an empty one are answers, recorded with their finish reason, not retried
        exp = sorted((by[("fx_exp", s)]["generation"]["finish_reason"], by[("fx_exp", s)]["response"]) for s in "01")
        assert [e[0] for e in exp] == ["length", "stop"] and exp[1][1] == ""
        # Sub: 500 on every attempt -> server_error after 1 + retries attempts; Transpose: a body that is not JSON
        kinds = {(e["task_id"], e["kind"], e["attempts"]) for e in errors}
        assert kinds == {("fx_sub", "server_error", 3), ("fx_transpose", "bad_response", 1)}
        assert len(lines) + len(errors) == 8 and len(by) == len(lines)  # one line per sample, in one file or the other
        g = by[("fx_argmax", "1")]["generation"]
        assert g["model"] == "stub-model" and g["endpoint_host"].startswith("127.0.0.1:") and g["seed"] == 7
        assert g["temperature"] == 0.2 and len(g["prompt_sha256"]) == 64 and g["prompt_tokens"] > 0
        assert server.requests[0].body["seed"] == 7 and server.requests[0].body["temperature"] == 0.2
        summary = capsys.readouterr().out
        assert "4/8 answered" in summary and "server_error 2" in summary and "$" in summary

        # the key went to the server, and nowhere else
        assert all(r.authorization == f"Bearer {KEY}" for r in server.requests)
        for f in (out, errors_path(out)):
            assert KEY not in f.read_text()
        assert KEY not in summary

        # a rerun asks only the samples without an answer: 2 Sub (500 each time: 3 attempts) + 2 Transpose
        assert main(["generate", "--config", str(cfg)]) == 1
        assert len(server.requests) - first == 2 * 3 + 2
        assert _read(out) == lines and len(_read(errors_path(out))) == 4


def test_a_line_cut_off_by_a_killed_run_is_asked_again_and_nothing_is_doubled(tmp_path, engine, monkeypatch):
    monkeypatch.setenv("MKB_TEST_KEY", KEY)
    with StubServer(lambda prompt, n: answer(f"answer {n} for {_op_of(prompt)}")) as server:
        cfg = _config(tmp_path, engine, server.base_url, samples=1)
        assert main(["generate", "--config", str(cfg)]) == 0
        out = tmp_path / "run" / "generated" / "stub-model.jsonl"
        whole = out.read_bytes()
        assert len(answered(out)) == 4
        out.write_bytes(whole[: len(whole) - 40])  # the last line cut in the middle, as a kill mid-write leaves it
        assert len(answered(out)) == 3 and out.read_bytes().endswith(b"\n")
        assert main(["generate", "--config", str(cfg)]) == 0
        assert len(server.requests) == 5 and len(answered(out)) == 4
        assert sorted(x["task_id"] for x in _read(out)) == ["fx_argmax", "fx_exp", "fx_sub", "fx_transpose"]


def test_timeouts_cut_connections_refusals_and_huge_answers(tmp_path, engine, monkeypatch):
    monkeypatch.setenv("MKB_TEST_KEY", KEY)
    acts = {"ArgMax": lambda n: Act("hang", seconds=3.0, text="late"),
            "Exp": lambda n: Act("cut") if n == 1 else answer("after a cut"),
            "Sub": lambda n: Act("refuse", text="I cannot help with that"),
            "Transpose": lambda n: answer("x" * 5_000_000)}
    with StubServer(lambda prompt, n: acts[_op_of(prompt)](n)) as server:
        cfg = _config(tmp_path, engine, server.base_url, samples=1, timeout_s=1.0, retries=1)
        assert main(["generate", "--config", str(cfg)]) == 1
        out = tmp_path / "run" / "generated" / "stub-model.jsonl"
        by = {x["task_id"]: x for x in _read(out)}
        errors = _read(errors_path(out))
        assert [(e["task_id"], e["kind"], e["attempts"]) for e in errors] == [("fx_argmax", "timeout", 2)]
        assert by["fx_exp"]["response"] == "after a cut" and by["fx_exp"]["generation"]["attempts"] == 2
        assert by["fx_sub"]["response"] == "" and by["fx_sub"]["generation"]["refusal"] == "I cannot help with that"
        assert by["fx_sub"]["generation"]["finish_reason"] == "refusal"
        assert len(by["fx_transpose"]["response"]) == 5_000_000
        assert len(server.requests) == 2 + 2 + 1 + 1


def test_bad_settings_are_named(tmp_path, engine, monkeypatch):
    monkeypatch.delenv("MKB_TEST_KEY", raising=False)
    cfg = _config(tmp_path, engine, "http://127.0.0.1:9/v1")
    with pytest.raises(GenerateError, match="MKB_TEST_KEY is not set"):
        from kit.generate.batch import generate
        generate(load_config(cfg))
    for url in ("ftp://x", "https://user:sk-secret@api.example.com/v1"):
        with pytest.raises(ConfigError, match="generate.base_url"):
            load_config(_config(tmp_path, engine, url))
    for key, value in (("api_key_env", "sk-abc-123"), ("samples", 0), ("unknown_key", 1)):
        with pytest.raises(ConfigError, match=re.escape(f"generate.{key}")):
            load_config(_config(tmp_path, engine, "http://127.0.0.1:9/v1", **{key: value}))
    out = tmp_path / "damaged.jsonl"
    out.write_text('{"task_id": "fx_exp", "sample_id": "0"}\nnext\n')
    with pytest.raises(GenerateError, match="damaged.jsonl:1"):
        answered(out)


@pytest.mark.slow
def test_generated_answers_are_scored_by_mkb_eval_with_one_command(tmp_path, engine, monkeypatch):
    """The scripted model answers with the fixture sample set (sample i of a task is its i-th sample folder, as
    a response of named code blocks); ``mkb eval`` with the ``[generate]`` section generates, then scores them:
    each gets its sample's status."""
    monkeypatch.setenv("MKB_TEST_KEY", KEY)
    ops = {t.op_type: t.id for t in load_suite(FIXTURE_ROOT / "tasks", "all", None)}

    def respond(prompt: str, n: int) -> Act:
        task = ops[_op_of(prompt)]
        sample = SAMPLES[(n - 1) % len(SAMPLES)]  # the same prompt is asked once per sample id
        folder = FIXTURE_ROOT / "candidates" / "sample" / task / sample
        blocks = [f"```cpp\n// {f.name}\n{f.read_text()}```" for f in sorted(folder.iterdir())]
        return answer(f"Here is the kernel (sample: {sample}).\n\n" + "\n\n".join(blocks))

    with StubServer(respond) as server:
        cfg = _config(tmp_path, engine, server.base_url, samples=4, concurrency=1, method="stub")
        assert main(["eval", "--config", str(cfg)]) == 0
        assert len(server.requests) == 16
    df = pl.DataFrame(read_records(tmp_path / "run"))
    assert df.height == 16 and set(df["method"]) == {"stub"}
    answers = _read(tmp_path / "run" / "generated" / "stub.jsonl")
    sample_of = {(a["task_id"], a["sample_id"]): re.search(r"\(sample: (\w+)\)", a["response"]).group(1)
                 for a in answers}
    assert sorted(sample_of.values()) == sorted(SAMPLES * 4)
    for rec in df.iter_rows(named=True):
        want = STATUS_OF[sample_of[(rec["task_id"], rec["sample_id"])]]
        assert rec["status"] == want, (rec["task_id"], rec["sample_id"], rec["status"], rec["error_message"])
        assert "keys ignored" not in json.dumps(rec.get("flags"))
    prov = json.loads((tmp_path / "run" / "provenance.json").read_text())
    gen = prov["generation"]
    assert gen["model"] == "stub-model" and gen["answers"] == 16 and gen["samples"] == 4
    assert gen["prompt_tokens"] > 0 and gen["finish_reasons"] == {"stop": 16} and len(gen["prompts_sha256"]) == 64
    assert load_provenance(tmp_path / "run")["generation"].startswith("stub-model at 127.0.0.1:")
    for f in (tmp_path / "run").rglob("*"):  # records, provenance, logs, answers: the key is in none of them
        assert not f.is_file() or KEY.encode() not in f.read_bytes(), f


def _sample_response(task_id: str, sample: str) -> str:
    folder = FIXTURE_ROOT / "candidates" / "sample" / task_id / sample
    blocks = [f"```cpp\n// {f.name}\n{f.read_text()}```" for f in sorted(folder.iterdir())]
    return f"Here is the kernel (sample: {sample}).\n\n" + "\n\n".join(blocks)


def _refining_model(last: str, n: int) -> Act:
    """A scripted model for fx_argmax: its first answer (request ``n`` = 1) does not compile, its answer to that
    feedback is wrong, its answer to the mismatch is correct; every other first answer is correct."""
    if "did not compile" in last:
        return answer(_sample_response("fx_argmax", "wrong_result"))
    if "outputs differ from the reference" in last:
        return answer(_sample_response("fx_argmax", "correct"))
    return answer(_sample_response("fx_argmax", "compile_error" if n == 1 else "correct"))

@pytest.mark.slow
def test_refine_fixes_a_compile_error_then_a_mismatch_and_best_of_k_scores_the_fixed_turn(tmp_path, engine,
                                                                                         monkeypatch):
    """Two chains on fx_argmax: the first answer of one does not compile, the kit's feedback names the compiler's
    error, its second answer is wrong, the feedback gives the error size, its third is correct; the other chain's
    first answer is correct and it stops there.  A rerun asks and evaluates nothing."""
    monkeypatch.setenv("MKB_TEST_KEY", KEY)
    with StubServer(_refining_model) as server:
        cfg = _config(tmp_path, engine, server.base_url, samples=2, method="stub")
        cfg.write_text(cfg.read_text().replace('split = "all"', 'split = "all"\nids = ["fx_argmax"]')
                       + "[refine]\nturns = 3\nstop_speedup = 0.0\n")
        assert main(["refine", "--config", str(cfg)]) == 0
        assert len(server.requests) == 4
        df = pl.DataFrame(read_records(tmp_path / "run"))
        got = {(r["sample_id"]): r["status"] for r in df.iter_rows(named=True)}
        fixed = next(c for c in ("c0", "c1") if got.get(f"{c}.t1") == "compile_error")
        other = "c1" if fixed == "c0" else "c0"
        assert got == {f"{fixed}.t1": "compile_error", f"{fixed}.t2": "verify_mismatch", f"{fixed}.t3": "ok",
                       f"{other}.t1": "ok"}
        turn2 = next(r.body["messages"] for r in server.requests if len(r.body["messages"]) == 3)
        turn3 = next(r.body["messages"] for r in server.requests if len(r.body["messages"]) == 5)
        assert "Compiler diagnostics" in turn2[-1]["content"] and "CPUArgMax.cpp" in turn2[-1]["content"]
        assert "Largest absolute error" in turn3[-1]["content"] and "atol" in turn3[-1]["content"]
        assert turn3[1]["role"] == "assistant" and "sample: compile_error" in turn3[1]["content"]
        assert not any(re.search(r"seed\s*[=:]?\s*\d", m["content"]) for m in turn2 + turn3)
        # best-of-k over the turns scores the task by the fixed turn
        from kit.score import metrics
        tasks = load_suite(FIXTURE_ROOT / "tasks", "all", ["fx_argmax"])
        best = metrics.per_task(df, tasks).row(0, named=True)
        assert best["correct"] and best["n_correct"] == 2 and best["n_samples"] == 4, best
        report = tmp_path / "report"
        assert main(["report", str(tmp_path / "run"), "--out", str(report), "--tasks-dir",
                     str(FIXTURE_ROOT / "tasks")]) == 0
        turns = json.loads((report / "report.json").read_text())["turns"]
        assert [(t["turn"], t["samples"], t["fcr"]) for t in turns] == [(1, 2, 100.0), (2, 3, 100.0), (3, 4, 100.0)]
        assert "By refinement turn" in (report / "report.html").read_text()
        assert (report / "plots" / "turns.png").stat().st_size > 1000
        bundle = tmp_path / "run.tar.gz"
        assert main(["bundle", str(tmp_path / "run"), "--out", str(bundle)]) == 0
        assert main(["validate", str(bundle)]) == 0  # the answers travel with the records
        assert main(["eval", "--config", str(cfg)]) == 0  # with [refine], mkb eval refines: nothing left to do
        assert len(server.requests) == 4 and pl.DataFrame(read_records(tmp_path / "run")).height == 4


def test_feedback_names_the_cause_hides_seeds_and_is_bounded(tmp_path, engine):
    from kit.generate.feedback import feedback
    from kit.results.records import Diagnostic, Record

    task = next(t for t in load_suite(FIXTURE_ROOT / "tasks", "all", None) if t.id == "fx_argmax")
    base = {"job_id": "j", "method": "m", "task_id": task.id, "sample_id": "c0.t1", "config_digest": "d",
            "candidate_sha256": "0" * 64}
    diags = [Diagnostic(file="CPUArgMax.cpp", line=i, column=3, severity="error", message=f"bad thing {i}",
                        context="  int x = ;\n        ^") for i in range(20)]
    text = feedback(Record(**base, status="compile_error", diagnostics=diags), task)
    assert "CPUArgMax.cpp:0:3: error: bad thing 0" in text and "12 more not shown" in text
    mismatch = Record(**base, status="verify_mismatch", error_kind="value", max_abs_err=0.5, max_rel_err=2.0,
                      error_message="7/7 trials failed; first (seed 1234): y differs; seeds=5, 6")
    text = feedback(mismatch, task)
    assert "Largest absolute error 0.5" in text and "1234" not in text and "5, 6" not in text
    ok = Record(**base, status="ok", speedup=0.8, speedup_ci_low=0.7, speedup_ci_high=0.9, native_ms=1.0,
                candidate_ms=1.25)
    assert "0.800x (95 % interval 0.700-0.900)" in feedback(ok, task)
    long = Record(**base, status="runtime_crash", error_kind="signal", error_message="x" * 50_000)
    assert len(feedback(long, task, max_chars=500)) <= 500


def test_refine_needs_a_generate_section(tmp_path, engine):
    cfg = _config(tmp_path, engine, "http://127.0.0.1:9/v1")
    text = cfg.read_text()
    cfg.write_text(text[: text.index("[generate]")] + "[refine]\nturns = 2\n")
    with pytest.raises(ConfigError, match="refine.*generate"):
        load_config(cfg)


def test_a_generate_killed_midway_loses_and_doubles_nothing_on_rerun(tmp_path, engine):
    """SIGKILL of ``mkb generate`` while requests are in flight, then the same command: every sample answered
    once; only the requests in flight at the kill were asked twice."""
    import os
    import signal
    import subprocess
    import sys
    import time

    def slow(prompt: str, n: int) -> Act:
        time.sleep(0.3)
        return answer(f"answer for {_op_of(prompt)}")

    with StubServer(slow) as server:
        cfg = _config(tmp_path, engine, server.base_url, samples=4, concurrency=2)
        env = {**os.environ, "MKB_TEST_KEY": KEY}
        cmd = [sys.executable, "-m", "kit.cli", "generate", "--config", str(cfg)]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out = tmp_path / "run" / "generated" / "stub-model.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not out.exists() or out.read_bytes().count(b"\n") < 5):
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        before = len(server.requests)
        assert 5 <= out.read_bytes().count(b"\n") < 16
        assert subprocess.run(cmd, env=env, capture_output=True).returncode == 0
        keys = [(x["task_id"], x["sample_id"]) for x in _read(out)]
        assert len(keys) == len(set(keys)) == 16
        assert len(server.requests) - before <= 16 - 5 + 0  # the rerun asked only what was missing
        assert len(server.requests) <= 16 + 2  # at most the 2 requests in flight were asked twice


@pytest.mark.slow
def test_a_refine_killed_midway_loses_and_doubles_nothing_on_rerun(tmp_path, engine):
    """SIGKILL of ``mkb refine`` once the first turn's answers are written (its evaluation under way), then the
    same command: the chains end as an uninterrupted refine ends them (compile error, mismatch, fixed; and a
    chain correct at once), every answer written once and every sample recorded once."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from kit.results.shards import scan

    def respond(last: str, n: int) -> Act:
        time.sleep(0.2)
        return _refining_model(last, n)

    with StubServer(respond) as server:
        cfg = _config(tmp_path, engine, server.base_url, samples=2, method="stub")
        cfg.write_text(cfg.read_text().replace('split = "all"', 'split = "all"\nids = ["fx_argmax"]')
                       + "[refine]\nturns = 3\nstop_speedup = 0.0\n")
        env = {**os.environ, "MKB_TEST_KEY": KEY}
        cmd = [sys.executable, "-m", "kit.cli", "refine", "--config", str(cfg)]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        generated = tmp_path / "run" / "generated"

        def lines() -> int:
            return sum(p.read_bytes().count(b"\n") for p in generated.glob("*.jsonl") if "errors" not in p.name)

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and (not generated.is_dir() or lines() < 2):
            time.sleep(0.05)
        assert proc.poll() is None, "refine ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert 2 <= lines() < 4
        assert subprocess.run(cmd, env=env, capture_output=True).returncode == 0
        answers = [(x["task_id"], x["sample_id"]) for p in generated.glob("*.jsonl") if "errors" not in p.name
                   for x in _read(p)]
        assert len(answers) == len(set(answers)) == 4
        df = scan(tmp_path / "run", dedupe=False).collect()
        got = [(r["sample_id"], r["status"]) for r in df.iter_rows(named=True)]
        assert len(got) == len({s for s, _ in got}) == 4, got
        fixed = next(c for c in ("c0", "c1") if (f"{c}.t1", "compile_error") in got)
        other = "c1" if fixed == "c0" else "c0"
        assert sorted(got) == sorted([(f"{fixed}.t1", "compile_error"), (f"{fixed}.t2", "verify_mismatch"),
                                      (f"{fixed}.t3", "ok"), (f"{other}.t1", "ok")])
