"""The bad-input cases of the adversarial corpus, through the ``mkb`` command as a user runs it (fixture engine).

Per candidate (one ``mkb eval`` over a JSONL of raw responses and a directory of files): a response with no code
block, a block naming a path outside the tree, one naming an absolute path, a response whose other-language and
unnamed blocks are ignored (kept as flags: a reviewer sees them), an unknown task id, a symlinked file.  Each gets
one record with its status and reason; the run goes on (exit 0).

Per run (each refused before anything is built, exit 2, the field or file named, no record written): impossible
config values, duplicate sample ids, a task folder changed since its manifest, a tree that is not MNN 3.2.2, a
tarball whose sha256 is not the configured one.  For both: no process of the run is left, nothing is written
outside the test's folder (HOME and the kit's cache point into it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest_fixture import FIXTURE_ROOT
from evalcfg import write_config

from kit.results.records import ErrorKind, Status
from kit.results.shards import read_records
from kit.stages.screen import IGNORED_RESPONSE

sys.path.insert(0, str(Path(__file__).parent / "adversarial"))
from checks import processes_naming  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TASK = "fx_argmax"
SAMPLE = FIXTURE_ROOT / "candidates" / "sample" / TASK / "correct"
MKB = [sys.executable, "-m", "kit.cli"]


def _block(name: str, text: str, lang: str = "cpp") -> str:
    return f"```{lang}\n// {name}\n{text}```\n"


def _responses() -> list[dict]:
    """(sample id, response) rows for ``TASK``, and one for a task the suite does not have."""
    honest = "".join(_block(f"source/backend/cpu/{f.name}", f.read_text()) for f in sorted(SAMPLE.iterdir()))
    rows = {
        "no_code": "I cannot write this kernel.",
        "traversal": _block("../../../etc/evil.cpp", "int x;\n"),
        "absolute": _block("/etc/evil.cpp", "int x;\n"),
        "ignored_parts": "```python\nprint('not C++')\n```\n```cpp\nint unnamed;\n```\n" + honest,
    }
    out = [{"task_id": TASK, "sample_id": k, "response": v} for k, v in rows.items()]
    return out + [{"task_id": "fx_nope", "sample_id": "unknown_task", "response": honest}]


#: sample id → (status, error kind, words of the reason or of a flag's)
EXPECT = {
    "no_code": (Status.REJECTED_INPUT, ErrorKind.PARSE, "no fenced code block"),
    "traversal": (Status.REJECTED_INPUT, ErrorKind.ALLOWLIST, "path traversal refused"),
    "absolute": (Status.REJECTED_INPUT, ErrorKind.ALLOWLIST, "/etc/evil.cpp"),
    "ignored_parts": (Status.OK, None, "language 'python' is not C/C++"),
    "unknown_task": (Status.REJECTED_INPUT, ErrorKind.PARSE, "unknown task id 'fx_nope'"),
    "symlinked": (Status.REJECTED_INPUT, ErrorKind.ALLOWLIST, "is a symbolic link (refused)"),
}


def _mkb(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(tmp / "home")}
    env.pop("MKB_MNN__SOURCE_DIR", None)
    return subprocess.run([*MKB, *args], capture_output=True, text=True, env=env, cwd=tmp, timeout=900)


def _config(tmp: Path, **over) -> Path:
    """The fixture config of these runs (candidates: ``tmp/c.jsonl``) with ``over``'s keyword arguments of
    :func:`evalcfg.write_config` instead."""
    kw = dict(run_dir=tmp / "run", tasks_dir=FIXTURE_ROOT / "tasks", ids=[TASK], method="inputs",
              candidates=tmp / "c.jsonl",
              mnn={"engine": "fixture", "source_dir": FIXTURE_ROOT, "cache_dir": tmp / "cache", "check_tree": False},
              verify={"trials": 2, "extra_trials": 1}, timing={"warmup": 1, "iterations": 3, "rounds": 2})
    return write_config(tmp / "cfg.toml", **{**kw, **over})


def _nothing_left(tmp: Path) -> None:
    assert not processes_naming(str(tmp)), processes_naming(str(tmp))
    assert not Path("/etc/evil.cpp").exists()


@pytest.fixture(scope="module")
def per_candidate(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad_inputs")
    (tmp / "responses.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _responses()))
    linked = tmp / "dirs" / TASK / "symlinked"
    linked.mkdir(parents=True)
    for f in SAMPLE.iterdir():
        (linked / f.name).symlink_to(f)
    cfg = _config(tmp, candidates=tmp / "responses.jsonl", more_sources={"dirs": tmp / "dirs"})
    res = _mkb(tmp, "eval", "--config", str(cfg))
    return tmp, res


@pytest.mark.slow  # the per_candidate run builds the fixture engine (~50 s on 2 cores)
def test_each_bad_candidate_gets_one_record_and_the_run_goes_on(per_candidate):
    tmp, res = per_candidate
    assert res.returncode == 0, res.stderr[-3000:]
    records = {r["sample_id"]: r for r in read_records(tmp / "run").to_dicts()}
    assert set(records) == set(EXPECT), sorted(records)
    for sample, (status, kind, words) in EXPECT.items():
        r = records[sample]
        why = f"{sample}: {r['status']}/{r['error_kind']}: {r['error_message'][:400]}"
        assert r["status"] == status.value, why
        if kind is not None:
            assert r["error_kind"] == kind.value, why
        texts = [r["error_message"] or ""] + [f["reason"] for f in r["flags"] or []]
        assert any(words in t for t in texts), why


@pytest.mark.slow  # the per_candidate run builds the fixture engine (~50 s on 2 cores)
def test_ignored_parts_of_a_response_are_kept_as_flags(per_candidate):
    tmp, _ = per_candidate
    (r,) = [r for r in read_records(tmp / "run").to_dicts() if r["sample_id"] == "ignored_parts"]
    ignored = [f["reason"] for f in r["flags"] if f["code"] == IGNORED_RESPONSE]
    assert len(ignored) == 2 and "names no file ('int unnamed;')" in ignored[1], r["flags"]


@pytest.mark.slow  # the per_candidate run builds the fixture engine (~50 s on 2 cores)
def test_bad_candidates_leave_nothing(per_candidate):
    _nothing_left(per_candidate[0])


def _tampered_suite(tmp: Path) -> dict:
    suite = tmp / "tasks"
    shutil.copytree(ROOT / "tasks", suite)
    model = next(suite.glob("*/abs_1d/model.onnx"))
    model.write_bytes(model.read_bytes() + b"\0")
    return {"tasks_dir": suite, "ids": ["abs_1d"]}


def _foreign_tarball(tmp: Path) -> dict:
    with tarfile.open(tmp / "mnn.tar.gz", "w:gz") as tf:
        tf.add(FIXTURE_ROOT / "README.md", arcname="MNN-3.2.2/README.md")
    return {"mnn": {"engine": "mnn", "tarball_url": f"file://{tmp}/mnn.tar.gz", "tarball_sha256": "0" * 64,
                    "cache_dir": tmp / "cache"}}


def _duplicate_ids(tmp: Path) -> dict:
    row = json.dumps({"task_id": TASK, "sample_id": "0", "response": "x"})
    (tmp / "dup.jsonl").write_text(row + "\n" + row + "\n")
    return {"candidates": tmp / "dup.jsonl"}


#: name → (config changes made in tmp, the words stderr must hold)
REFUSED = {
    "zero_iterations": (lambda tmp: {"timing": {"iterations": 0}}, "'timing.iterations'"),
    "zero_trials": (lambda tmp: {"verify": {"trials": 0}}, "'verify.trials'"),
    "negative_timeout": (lambda tmp: {"build": {"candidate_timeout_s": -1}}, "'build.candidate_timeout_s'"),
    "zero_jobs": (lambda tmp: {"build": {"jobs": 0}}, "'build.jobs'"),
    "duplicate_sample_ids": (_duplicate_ids, "dup.jsonl:2: duplicate (task_id, sample_id)"),
    "tampered_task": (_tampered_suite, "abs_1d: model.onnx sha256 differs from manifest.json"),
    "not_mnn_3_2_2": (lambda tmp: {"mnn": {"engine": "mnn", "source_dir": FIXTURE_ROOT, "cache_dir": tmp / "cache"}},
                      "not the pinned MNN 3.2.2"),
    "tarball_sha256": (_foreign_tarball, "differs from mnn.tarball_sha256"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_bad_run_is_refused_before_anything_runs(tmp_path, name):
    change, words = REFUSED[name]
    (tmp_path / "c.jsonl").write_text(json.dumps({"task_id": TASK, "sample_id": "0", "response": "x"}) + "\n")
    cfg = _config(tmp_path, **change(tmp_path))
    res = _mkb(tmp_path, "eval", "--config", str(cfg))
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    assert words in res.stderr, res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    shards = tmp_path / "run" / "shards"
    assert not shards.exists() or not any(shards.iterdir()), "a refused run wrote records"
    assert not (tmp_path / "cache" / "native").exists()  # nothing was built
    _nothing_left(tmp_path)
