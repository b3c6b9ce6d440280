"""``mkb serve`` over real HTTP on loopback (httpx), on the fixture engine: concurrent clients and their verdicts,
one record per accepted check in the run directory (which ``mkb report`` and ``mkb bundle`` read), the cache, every refusal (401,
404, 409, 411, 413, 422, 429), a hostile candidate, and a restart that keeps finished verdicts and runs the
accepted ones again.

One service (one worker, one native build of the engine) is shared by the module's tests, in file order; the last
two stop it and start the service again over the same run directory (in this process, then as ``mkb serve``
processes, one of them killed).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from conftest_fixture import FIXTURE_ROOT, copy_fixture_engine
from serving import TOKEN, Running, files_of

from kit.bench.chatserver import Act, StubServer, answer
from kit.cli import main
from kit.results.shards import scan
from kit.serve import engine as serve_engine
from kit.serve.app import body_limit
from kit.serve.lane import JOURNAL_FILE
from kit.serve.server import TOKEN_ENV, service
from kit.settings.config import load_config
from kit.suite.prompts import headers_for
from kit.suite.tasks import load_suite

pytestmark = pytest.mark.slow

STATUS_OF = {"correct": "ok", "compile_error": "compile_error", "wrong_result": "verify_mismatch",
             "crash": "runtime_crash"}
SAMPLES = FIXTURE_ROOT / "candidates" / "sample"
#: a hostile candidate of the adversarial corpus and the status its check gives (tests/test_anticheat_fixture.py)
HOSTILE = (FIXTURE_ROOT / "candidates" / "hostile" / "fx_exp" / "writes_input", "verify_mismatch")
MAX_FILE_BYTES = 16 * 1024


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    """The fixture engine with stand-in headers for the prompts, its kit cache beside it, and a config."""
    tmp = tmp_path_factory.mktemp("serve")
    engine = copy_fixture_engine(tmp / "engine")
    for task in load_suite(FIXTURE_ROOT / "tasks", "all", None):
        for rel in headers_for(task):
            if not (engine / rel).exists():
                (engine / rel).parent.mkdir(parents=True, exist_ok=True)
                (engine / rel).write_text(f"// {Path(rel).name}: a stand-in header for the prompt\n#pragma once\n")
    path = tmp / "cfg.toml"
    path.write_text(f"""
[run]
dir = "{tmp / 'run'}"
[tasks]
dir = "{FIXTURE_ROOT / 'tasks'}"
split = "all"
[candidates]
max_file_bytes = {MAX_FILE_BYTES}
[mnn]
engine = "fixture"
source_dir = "{engine}"
cache_dir = "{tmp / 'cache'}"
[build]
jobs = 2
[dispatch]
mode = "serial"
[report]
enabled = false
[verify]
trials = 2
extra_trials = 1
[timing]
warmup = 1
iterations = 5
rounds = 2
""")
    return path


@pytest.fixture(scope="module")
def served(config):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(serve_engine, "COMPACT_EVERY", 4)  # the journal rewritten every 4 finished checks
        running = Running(service(load_config(config), TOKEN, port=0, workers=1, queue_limit=32))
        yield running
        running.stop()


@pytest.fixture(scope="module")
def submitted(served):
    """32 concurrent clients: 16 each submitting one candidate of the sample set and asking for its verdict
    (blocking), a 17th with a hostile candidate, and 15 that send the first 15 sample candidates again under
    another method while the first are queued or running: ({(task, sample): (POST status, final check view)}
    of the 17, the same of the 15 echoes)."""
    jobs = [(d.parent.name, d.name, files_of(d), "sample") for d in sorted(SAMPLES.glob("*/*"))]
    jobs.append(("fx_exp", "hostile", files_of(HOSTILE[0]), "sample"))
    echoes = [(t, s, f, "echo") for t, s, f, _ in jobs[:15]]

    def one(task: str, sample: str, files: dict[str, str], method: str) -> tuple[int, dict]:
        body = {"task_id": task, "files": files, "method": method}
        if method == "sample":
            body["sample_id"] = sample
        with served.client() as c:
            r = c.post("/v1/checks", json=body)
            if r.status_code != 202:
                return r.status_code, r.json()
            for _ in range(5):
                view = c.get(f"/v1/checks/{r.json()['id']}", params={"wait": 300}).json()
                if view["state"] == "done":
                    break
            return 202, view

    every = jobs + echoes
    assert len(every) == 32
    with ThreadPoolExecutor(len(every)) as pool:
        views = list(pool.map(lambda j: one(*j), every))
    keys = [(t, s) for t, s, _, _ in every]
    return dict(zip(keys[:len(jobs)], views[:len(jobs)])), dict(zip(keys[len(jobs):], views[len(jobs):]))


@pytest.fixture(scope="module")
def batch(submitted):
    return submitted[0]


def test_a_candidate_sent_again_while_it_runs_gets_the_same_check(submitted):
    batch, echoes = submitted
    assert len(echoes) == 15
    for key, (code, view) in echoes.items():
        assert code == 202, (key, view)
        first = batch[key][1]
        assert view["id"] == first["id"] and view["status"] == first["status"], (key, view, first)
        assert view["verdict"] == first["verdict"] and view["reward"] == first["reward"]


def test_concurrent_clients_get_the_statuses_of_mkb_eval(batch):
    assert len(batch) == 17
    for (task, sample), (code, view) in batch.items():
        assert code == 202, (task, sample, view)
        assert view["state"] == "done", (task, sample, view)
        want = HOSTILE[1] if sample == "hostile" else STATUS_OF[sample]
        assert view["status"] == want == view["verdict"]["status"], (task, sample, view["verdict"]["error_message"])
        assert view["verdict"]["job_id"] == view["id"] and view["verdict"]["task_id"] == task
        if want == "ok":
            assert view["reward"] >= 0.5 and view["ended_in"] == "time" and view["verdict"]["timing_s"] > 0
        else:
            assert view["reward"] == 0.0
    assert batch[("fx_argmax", "compile_error")][1]["ended_in"] == "build"
    assert batch[("fx_sub", "wrong_result")][1]["ended_in"] == "verify"


def test_every_accepted_check_has_exactly_one_record(batch, served, tmp_path):
    run_dir = served.svc.engine.cfg.run.dir
    df = scan(run_dir, dedupe=False).collect()
    ids = {view["id"] for _, view in batch.values()}
    counts = Counter(df["job_id"].to_list())
    assert set(counts) >= ids and all(counts[i] == 1 for i in ids)
    # by check id: a candidate whose echo (test_a_candidate_sent_again_while_it_runs_gets_the_same_check) came
    # first is recorded under the echo's method and sample id, and the first client gets that check
    statuses = {r["job_id"]: r["status"] for r in df.iter_rows(named=True) if r["job_id"] in ids}
    assert statuses == {v["id"]: v["status"] for _, v in batch.values()} and len(statuses) == len(batch)
    # the journal keeps the checks still to run: rewritten as checks finish, it never holds them all
    assert len((run_dir / JOURNAL_FILE).read_text().splitlines()) < 4
    # the run directory is an mkb eval one: mkb report reads it (tasks and selection from its provenance.json)
    assert main(["report", str(run_dir), "--out", str(tmp_path / "report")]) == 0
    summary = json.loads((tmp_path / "report" / "report.json").read_text())["summary"]
    assert "sample" in {row["method"] for row in summary}
    # and mkb bundle: the received candidates are a source of the run (serve-candidates/sample.jsonl)
    assert main(["bundle", str(run_dir), "--out", str(tmp_path / "served.tar.gz")]) == 0
    assert main(["validate", str(tmp_path / "served.tar.gz")]) == 0


def test_an_identical_submission_is_answered_from_the_cache(batch, served):
    before = scan(served.svc.engine.cfg.run.dir, dedupe=False).collect().height
    first = batch[("fx_exp", "correct")][1]
    with served.client() as c:
        r = c.post("/v1/checks", json={"task_id": "fx_exp", "files": files_of(SAMPLES / "fx_exp" / "correct"),
                                       "method": "another"})
        stats = c.get("/v1/stats").json()
    assert r.status_code == 202
    again = r.json()
    assert again["cached"] and again["state"] == "done" and again["id"] == first["id"]
    assert again["verdict"] == first["verdict"] and again["reward"] == first["reward"]
    assert scan(served.svc.engine.cfg.run.dir, dedupe=False).collect().height == before
    assert stats["cache_hits"] >= 1 and stats["done"] >= 17 and stats["workers"] == 1
    assert 0 < stats["time_to_verdict_p50_s"] <= stats["time_to_verdict_p95_s"]


def test_refusals_name_what_is_wrong(batch, served):
    good = {"task_id": "fx_exp", "files": files_of(SAMPLES / "fx_exp" / "correct")}
    with served.client() as c, served.client(token=None) as anon, served.client(token="wrong") as wrong:
        assert anon.get("/v1/health").json() == {"status": "ok"}
        for client in (anon, wrong):
            assert client.post("/v1/checks", json=good).status_code == 401
            assert client.get("/v1/stats").status_code == 401
            assert client.get("/v1/tasks").status_code == 401
            assert client.get("/v1/openapi.json").status_code == 401
        assert "WWW-Authenticate" in anon.get("/v1/tasks").headers
        assert c.post("/v1/checks", json={**good, "task_id": "no_such_task"}).status_code == 404
        assert c.get("/v1/checks/0123456789abcdef01234567").status_code == 404
        r = c.post("/v1/checks", json={"files": good["files"]})
        assert r.status_code == 422 and "body.task_id" in r.json()["detail"]
        r = c.post("/v1/checks", json={**good, "sample_id": "../x"})
        assert r.status_code == 422 and "body.sample_id" in r.json()["detail"]
        r = c.post("/v1/checks", json={**good, "options": {"timing": False, "speed": 1}})
        assert r.status_code == 422 and "body.options.speed" in r.json()["detail"]
        r = c.post("/v1/checks", json={**good, "response": "```cpp\n```"})
        assert r.status_code == 422 and "exactly one of files or response" in r.json()["detail"]
        r = c.post("/v1/checks", content=b"{not json", headers={"Content-Type": "application/json"})
        assert r.status_code == 422
        big = {"task_id": "fx_exp", "files": {"CPUUnary.cpp": "x" * body_limit(MAX_FILE_BYTES)}}
        assert c.post("/v1/checks", json=big).status_code == 413
        # one sample id, one candidate: another candidate under sample/fx_exp/correct is refused
        crash = {n: t + "\n// another\n" for n, t in files_of(SAMPLES / "fx_exp" / "crash").items()}
        other = {"task_id": "fx_exp", "files": crash, "method": "sample", "sample_id": "correct"}
        r = c.post("/v1/checks", json=other)
        assert r.status_code == 409 and "sample_id" in r.json()["detail"]
        assert c.get("/v1/openapi.json").json()["paths"]["/v1/checks"]["post"]


def test_a_candidate_refused_before_any_build_has_its_verdict_at_once(served):
    with served.client() as c:
        r = c.post("/v1/checks", json={"task_id": "fx_exp", "files": {"../CPUUnary.cpp": "int x;\n"}})
        response = c.post("/v1/checks", json={"task_id": "fx_exp", "response": "no code here"})
    for view in (r.json(), response.json()):
        assert view["state"] == "done" and view["status"] == "rejected_input", view
        assert view["ended_in"] == "screen" and view["reward"] == 0.0


def test_a_task_shows_its_prompt_and_spec_but_no_seeds(served):
    with served.client() as c:
        listed = c.get("/v1/tasks").json()
        t = c.get("/v1/tasks/fx_argmax").json()
        assert c.get("/v1/tasks/no_such_task").status_code == 404
    assert sorted(x["id"] for x in listed) == ["fx_argmax", "fx_exp", "fx_sub", "fx_transpose"]
    assert t["prompt"] and "ArgMax" in t["prompt"] and t["prompt_error"] == ""
    assert t["files"] == ["CPUArgMax.cpp", "CPUArgMax.hpp"] and t["inputs"][0]["shape"] == [16, 129, 64]
    assert not {"seed", "seeds", "trials", "references", "verify"} & set(t)
    assert "seed" not in json.dumps({k: v for k, v in t.items() if k != "prompt"})


def test_correctness_only_goes_to_its_own_run_directory(served):
    files = files_of(SAMPLES / "fx_transpose" / "correct")
    with served.client() as c:
        r = c.post("/v1/checks", json={"task_id": "fx_transpose", "files": files, "options": {"timing": False}})
        assert r.status_code == 202 and not r.json()["cached"]  # another config digest: not the timed verdict
        view = c.get(f"/v1/checks/{r.json()['id']}", params={"wait": 300}).json()
    assert view["state"] == "done" and view["status"] == "ok" and view["timing"] is False
    assert view["ended_in"] == "verify" and view["reward"] == 1.0 and view["verdict"]["timing_s"] is None
    run_dir = served.svc.engine.cfg.run.dir
    side = scan(run_dir.with_name(run_dir.name + "-no-timing"), dedupe=False).collect()
    assert side["job_id"].to_list() == [view["id"]]


def test_an_episode_keeps_its_best_step(batch, served):
    """Gym-like: each step is a check of the episode's task (an identical one answered from the cache), the
    episode keeps the step of highest reward."""
    argmax = SAMPLES / "fx_argmax"
    wrong = {n: t + "\n// a step\n" for n, t in files_of(argmax / "wrong_result").items()}
    with served.client() as c:
        opened = c.post("/v1/episodes", json={"task_id": "fx_argmax", "method": "agent"})
        assert opened.status_code == 201
        eid = opened.json()["id"]
        steps = [c.post(f"/v1/episodes/{eid}/steps", params={"wait": 300}, json={"files": files}).json()
                 for files in (files_of(argmax / "compile_error"), files_of(argmax / "correct"), wrong)]
        view = c.get(f"/v1/episodes/{eid}").json()
        assert c.post("/v1/episodes", json={"task_id": "no_such_task"}).status_code == 404
        assert c.get("/v1/episodes/no-such-episode").status_code == 404
        assert c.post(f"/v1/episodes/{eid}/steps", json={}).status_code == 422
    assert [s["status"] for s in steps] == ["compile_error", "ok", "verify_mismatch"]
    assert steps[0]["cached"] and steps[1]["cached"] and not steps[2]["cached"]
    assert steps[2]["method"] == "agent" and steps[2]["sample_id"] == f"{eid}-2"
    assert view["steps"] == [s["id"] for s in steps] and view["best"]["id"] == steps[1]["id"]
    assert view["best"]["reward"] >= 0.5


def _response(folder: Path) -> str:
    """A model's answer carrying ``folder``'s files as named code blocks (what the kit's parser reads)."""
    blocks = [f"```cpp\n// {f.name}\n{f.read_text()}```" for f in sorted(folder.iterdir())]
    return "Here is the kernel.\n\n" + "\n\n".join(blocks)


def test_the_agent_loop_of_docs_serve_md_runs_as_written(served, tmp_path, monkeypatch, capsys):
    """docs/serve.md's agent loop, run as the page gives it (the service's address, a fixture task and the token
    file put in) against a scripted OpenAI-compatible model whose first answer does not compile and whose
    answers to feedback are correct: four turns, the compiler's error fed back once, the best turn correct."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "serve.md").read_text()
    code = page.split("## An agent loop", 1)[1].split("```python\n", 1)[1].split("```\n", 1)[0]
    assert len(code.strip().splitlines()) <= 22  # the "20-line agent loop", imports included
    for shown, here in (("http://127.0.0.1:8765/v1", served.svc.url + "/v1"), ('"argmax_axis1_keep_4d"', '"fx_argmax"')):
        assert shown in code
        code = code.replace(shown, here)
    fed_back = []

    def model(last: str, _n: int) -> Act:
        if last.startswith("Your kernel ended in"):
            fed_back.append(last)
            return answer(_response(SAMPLES / "fx_argmax" / "correct"))
        return answer(_response(SAMPLES / "fx_argmax" / "compile_error"))

    (tmp_path / "token.txt").write_text(TOKEN + "\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-agent-loop")
    with StubServer(model) as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        exec(compile(code, "docs/serve.md", "exec"), {"__name__": "agent_loop"})  # noqa: S102 - the page's code
    lines = capsys.readouterr().out.splitlines()
    turns = [ln.split()[:2] for ln in lines if ln[:1].isdigit()]
    assert turns == [["0", "compile_error"], ["1", "ok"], ["2", "ok"], ["3", "ok"]], lines
    assert fed_back[0].startswith("Your kernel ended in build: compile_error"), fed_back[0][:200]
    assert lines[-1].startswith("best: ") and lines[-1].split()[2] == "ok", lines[-1]


def test_a_restart_keeps_finished_verdicts_and_runs_the_accepted_ones(batch, served, config):
    """Stop the service; an intake-only engine (no worker) accepts one check and refuses the next (429, queue of
    1); a new service over the same run directory answers the earlier verdicts without running them, runs the
    accepted check, and writes no record twice."""
    served.stop()
    cfg = load_config(config)
    base = files_of(SAMPLES / "fx_exp" / "correct")
    variant = {n: t + "\n// variant 1\n" if n.endswith(".cpp") else t for n, t in base.items()}
    another = {n: t + "\n// variant 2\n" if n.endswith(".cpp") else t for n, t in base.items()}
    intake = Running(service(cfg, TOKEN, port=0, workers=0, queue_limit=1))
    try:
        with intake.client() as c:
            accepted = c.post("/v1/checks", json={"task_id": "fx_exp", "files": variant})
            full = c.post("/v1/checks", json={"task_id": "fx_exp", "files": another})
            same = c.post("/v1/checks", json={"task_id": "fx_exp", "files": variant})
    finally:
        intake.stop()
    assert accepted.status_code == 202 and accepted.json()["state"] == "queued"
    assert full.status_code == 429 and int(full.headers["Retry-After"]) >= 1
    assert same.status_code == 202 and same.json()["id"] == accepted.json()["id"] and same.json()["cached"]
    assert accepted.json()["id"] in (cfg.run.dir / JOURNAL_FILE).read_text()

    again = Running(service(cfg, TOKEN, port=0, workers=1, queue_limit=8))
    try:
        with again.client() as c:
            done = c.get(f"/v1/checks/{accepted.json()['id']}", params={"wait": 300}).json()
            earlier = {k: c.get(f"/v1/checks/{v['id']}").json() for k, (_, v) in batch.items()}
            stats = c.get("/v1/stats").json()
    finally:
        again.stop()
    assert done["state"] == "done" and done["status"] == "ok"
    assert all(v["state"] == "done" and v["status"] == batch[k][1]["status"] for k, v in earlier.items())
    assert stats["done"] == 1  # only the accepted check ran
    counts = Counter(scan(cfg.run.dir, dedupe=False).collect()["job_id"].to_list())
    assert counts[done["id"]] == 1 and max(counts.values()) == 1


class Process:
    """``mkb serve`` in a process of its own (port 0), its stderr read by a thread."""

    def __init__(self, config: Path, token: str | None) -> None:
        env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV} | ({TOKEN_ENV: token} if token else {})
        self.proc = subprocess.Popen([sys.executable, "-m", "kit.cli", "serve", "--config", str(config), "--port", "0"],
                                     stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
        self.lines: list[str] = []
        threading.Thread(target=lambda: self.lines.extend(iter(self.proc.stderr.readline, "")), daemon=True).start()
        self.url = self._line(r"mkb serve: (http://\S+)")

    def _line(self, pattern: str, limit_s: float = 120.0) -> str:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline and self.proc.poll() is None:
            for line in list(self.lines):
                if m := re.search(pattern, line):
                    return m.group(1)
            time.sleep(0.05)
        raise AssertionError(f"no line like {pattern!r} from mkb serve: {''.join(self.lines)[-2000:]}")

    def client(self, token: str) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {token}"},
                            timeout=httpx.Timeout(330.0))

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)


def test_a_killed_service_restarted_finishes_what_it_accepted_once(config, served):
    """``mkb serve`` prints a generated token once; SIGKILLed while checks wait, it is started again: the verdict
    finished before the kill is kept (not run again), the accepted checks finish, no record is written twice."""
    served.stop()
    cfg = load_config(config)
    base = files_of(SAMPLES / "fx_exp" / "correct")
    variants = [{n: t + f"\n// kill {i}\n" if n.endswith(".cpp") else t for n, t in base.items()} for i in range(2)]
    first = Process(config, token=None)
    try:
        token = first._line(r"token .*: (\S+)$")
        assert "\n".join(first.lines).count(token) == 1
        with first.client(token) as c:
            ids = [c.post("/v1/checks", json={"task_id": "fx_exp", "files": f}).json()["id"] for f in variants]
            assert c.get(f"/v1/checks/{ids[0]}", params={"wait": 300}).json()["state"] == "done"
    finally:
        first.kill()
    second = Process(config, token=TOKEN)
    try:
        with second.client(TOKEN) as c:
            views = [c.get(f"/v1/checks/{i}", params={"wait": 300}).json() for i in ids]
            stats = c.get("/v1/stats").json()
    finally:
        second.kill()
    assert [v["status"] for v in views] == ["ok"] * 2
    assert stats["done"] <= 1  # the first verdict was kept, not run again
    counts = Counter(scan(cfg.run.dir, dedupe=False).collect()["job_id"].to_list())
    assert all(counts[i] == 1 for i in ids) and max(counts.values()) == 1
