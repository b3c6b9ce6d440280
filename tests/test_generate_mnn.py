"""``mkb eval`` with a ``[generate]`` section on a real MNN 3.2.2 tree (runs only with MKB_MNN__SOURCE_DIR set):
a scripted model on loopback (kit/bench/chatserver.py) answers with the sample set's TopK candidates, the prompts
quote the real tree, and every answer gets the status candidates/expected.toml gives its sample."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import polars as pl
import pytest
from sample_expected import expected_statuses

from kit.bench.chatserver import StubServer, answer
from kit.cli import main
from kit.results.shards import read_records

pytestmark = [pytest.mark.mnn, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
TASK = "topk_axis1_smallest"
SAMPLES = ("compile_error", "correct", "crash", "wrong")


def _config(tmp_path: Path, base_url: str, samples: int, extra: str = "") -> Path:
    """A config of the TopK task on the real tree, serial, a short timing protocol, a scripted model at
    ``base_url`` giving ``samples`` answers per task; ``extra``: lines appended (after ``[generate]``)."""
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(f"""
[run]
dir = "{tmp_path / 'run'}"
[tasks]
dir = "{ROOT / 'tasks'}"
split = "all"
ids = ["{TASK}"]
[dispatch]
mode = "serial"
[report]
enabled = false
[timing]
warmup = 5
iterations = 30
rounds = 3
[generate]
model = "scripted"
base_url = "{base_url}"
api_key_env = "MKB_TEST_KEY"
samples = {samples}
""" + extra)
    return cfg


def test_a_model_answering_with_the_sample_set_gets_the_sample_statuses(tmp_path, monkeypatch):
    monkeypatch.setenv("MKB_TEST_KEY", "sk-canary-mnn-generate")
    asked: list[str] = []

    def respond(prompt: str, n: int):
        asked.append(prompt)
        sample = SAMPLES[(n - 1) % len(SAMPLES)]
        folder = ROOT / "candidates" / "sample" / TASK / sample
        blocks = [f"```cpp\n// {f.name}\n{f.read_text()}```" for f in sorted(folder.iterdir())]
        return answer(f"(sample: {sample})\n\n" + "\n\n".join(blocks))

    with StubServer(respond) as server:
        cfg = _config(tmp_path, server.base_url, samples=4, extra="concurrency = 1\n")
        assert main(["eval", "--config", str(cfg)]) == 0
    assert len(asked) == 4 and "MNN" in asked[0] and os.environ["MKB_MNN__SOURCE_DIR"]
    answers = {(a := json.loads(x))["sample_id"]: re.search(r"\(sample: (\w+)\)", a["response"]).group(1)
               for x in (tmp_path / "run" / "generated" / "scripted.jsonl").read_text().splitlines()}
    expected = expected_statuses("x86_64")
    df = pl.DataFrame(read_records(tmp_path / "run"))
    assert df.height == 4
    for rec in df.iter_rows(named=True):
        want = expected[f"{TASK}/{answers[rec['sample_id']]}"]
        assert rec["status"] == want, (rec["sample_id"], rec["status"], rec["error_message"])


def test_refine_on_the_real_tree_fixes_a_compile_error_then_a_mismatch(tmp_path, monkeypatch):
    """One chain: the TopK answer that does not compile, then (on the compiler's feedback) the wrong one, then (on
    the error sizes) the correct one: three samples, the third ok, and best-of-k scores the task correct."""
    monkeypatch.setenv("MKB_TEST_KEY", "sk-canary-mnn-refine")

    def files(sample: str) -> str:
        folder = ROOT / "candidates" / "sample" / TASK / sample
        return "\n\n".join(f"```cpp\n// {f.name}\n{f.read_text()}```" for f in sorted(folder.iterdir()))

    def respond(last: str, n: int):
        if "did not compile" in last:
            return answer(files("wrong"))
        if "outputs differ from the reference" in last:
            return answer(files("correct"))
        return answer(files("compile_error"))

    with StubServer(respond) as server:
        cfg = _config(tmp_path, server.base_url, samples=1, extra="[refine]\nturns = 3\n")
        assert main(["refine", "--config", str(cfg)]) == 0
        assert len(server.requests) == 3
    got = {r["sample_id"]: r["status"] for r in read_records(tmp_path / "run").iter_rows(named=True)}
    assert got == {"c0.t1": "compile_error", "c0.t2": "verify_mismatch", "c0.t3": "ok"}
