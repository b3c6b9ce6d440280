"""Parsing LLM responses into candidate files and the allowlist checks (kit/candidates/)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from kit.candidates import (
    Candidate,
    CandidateSourceError,
    Rejection,
    files_sha256,
    load_candidates,
    native_candidate,
    parse_response,
)
from kit.results.records import ErrorKind
from kit.settings.config import CandidateSource
from kit.suite.tasks import Task

MAX = 4096


def _task(tid: str = "argmax_axis1", files=None, new_files=None, mechanism: str = "atomic") -> Task:
    return Task(
        id=tid,
        category="reduction",
        op_type="ArgMax",
        mechanism=mechanism,
        split="test",
        mnn_op_types=["ArgMax"],
        inputs=[{"name": "x", "shape": [4, 8]}],
        outputs=[{"name": "y", "shape": [4], "dtype": "int64"}],
        mnn={
            "files": ["source/backend/cpu/CPUArgMax.hpp", "source/backend/cpu/CPUArgMax.cpp"]
            if files is None
            else files,
            "new_files": new_files or [],
        },
    )


ARGMAX = _task()
COMPOSITE = _task(
    "bitwise_xor",
    files=[],
    new_files=["tools/converter/source/optimizer/onnxextra/Onnx*.cpp"],
    mechanism="composite",
)
TASKS = {t.id: t for t in (ARGMAX, COMPOSITE)}


def _from_response(tmp_path: Path, response: str, task_id: str = "argmax_axis1") -> Candidate | Rejection:
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps({"task_id": task_id, "sample_id": "0", "response": response}) + "\n")
    (res,) = load_candidates(CandidateSource(method="m", path=p), TASKS, MAX)
    return res


def _rejected(res, kind: ErrorKind, *words: str) -> None:
    assert isinstance(res, Rejection), res
    assert res.error_kind == kind, res.reason
    for w in words:
        assert w in res.reason, res.reason


# ------------------------------------------------------------------------------------------- parsing


def test_prose_and_two_blocks(tmp_path):
    resp = (
        "Here is my implementation.\n\n```cpp\n// CPUArgMax.hpp\n#pragma once\nint f();\n```\n\n"
        'And the source:\n\n```c++\n// File: CPUArgMax.cpp\n#include "CPUArgMax.hpp"\nint f() { return 1; }\n```\nDone.\n'
    )
    c = _from_response(tmp_path, resp)
    assert isinstance(c, Candidate)
    assert c.files == {
        "CPUArgMax.hpp": "#pragma once\nint f();\n",
        "CPUArgMax.cpp": '#include "CPUArgMax.hpp"\nint f() { return 1; }\n',
    }
    assert c.method == "m" and c.task_id == "argmax_axis1" and c.sample_id == "0"
    assert c.origin.endswith("c.jsonl:1")
    assert c.sha256 == files_sha256(c.files)
    assert c.placements(ARGMAX) == {
        "source/backend/cpu/CPUArgMax.hpp": "#pragma once\nint f();\n",
        "source/backend/cpu/CPUArgMax.cpp": '#include "CPUArgMax.hpp"\nint f() { return 1; }\n',
    }


@pytest.mark.parametrize(
    "first_line",
    [
        "// CPUArgMax.cpp",
        "// File: CPUArgMax.cpp",
        "/* CPUArgMax.cpp */",
        "CPUArgMax.cpp",
        "// source/backend/cpu/CPUArgMax.cpp",
        "//filename: `CPUArgMax.cpp`",
    ],
)
def test_name_line_forms(first_line):
    parsed = parse_response(f"```cpp\n{first_line}\nint x;\n```\n")
    name = next(iter(parsed.files))
    assert name.endswith("CPUArgMax.cpp")
    assert parsed.files[name] == "int x;\n"


def test_tilde_fence_and_plain_fence():
    parsed = parse_response("~~~\n// CPUArgMax.cpp\nint a;\n~~~\n```\n// CPUArgMax.hpp\nint b;\n```\n")
    assert parsed.files == {"CPUArgMax.cpp": "int a;\n", "CPUArgMax.hpp": "int b;\n"}


def test_crlf_line_endings(tmp_path):
    c = _from_response(tmp_path, "text\r\n```cpp\r\n// CPUArgMax.cpp\r\nint a;\r\nint b;\r\n```\r\n")
    assert isinstance(c, Candidate)
    assert c.files == {"CPUArgMax.cpp": "int a;\nint b;\n"}


def test_nested_backticks_inside_code():
    # a longer outer fence keeps an inner ``` line, and backticks inside a line never close a block
    resp = (
        '````cpp\n// CPUArgMax.cpp\nconst char* s = R"(```)";\n```\nint after_inner_fence;\n````\n'
        '```cpp\n// CPUArgMax.hpp\nauto t = "``` not a fence";\n```\n'
    )
    parsed = parse_response(resp)
    assert parsed.files["CPUArgMax.cpp"] == 'const char* s = R"(```)";\n```\nint after_inner_fence;\n'
    assert parsed.files["CPUArgMax.hpp"] == 'auto t = "``` not a fence";\n'


def test_duplicate_block_last_wins(tmp_path):
    resp = "```cpp\n// CPUArgMax.cpp\nint first;\n```\n```cpp\n// CPUArgMax.cpp\nint second;\n```\n"
    c = _from_response(tmp_path, resp)
    assert isinstance(c, Candidate)
    assert c.files == {"CPUArgMax.cpp": "int second;\n"}
    assert any("more than once" in n for n in c.notes)


def test_unnamed_and_other_language_blocks_ignored_with_note(tmp_path):
    resp = (
        "```cpp\n#include <vector>\nint unnamed;\n```\n```python\n# CPUArgMax.cpp\nprint(1)\n```\n"
        "```cpp\n// CPUArgMax.cpp\nint named;\n```\n"
    )
    c = _from_response(tmp_path, resp)
    assert isinstance(c, Candidate)
    assert c.files == {"CPUArgMax.cpp": "int named;\n"}
    assert any("names no file" in n for n in c.notes)
    assert any("'python'" in n for n in c.notes)


def test_unclosed_block_taken_to_end():
    parsed = parse_response("```cpp\n// CPUArgMax.cpp\nint truncated")
    assert parsed.files == {"CPUArgMax.cpp": "int truncated\n"}
    assert any("no closing fence" in n for n in parsed.notes)


@pytest.mark.parametrize(
    "response, words",
    [
        ("", ["empty"]),
        ("   \n\n", ["empty"]),
        ("I cannot help with that.", ["no fenced code block"]),
        ("```cpp\nint x;\n```\n", ["names a file", "1 fenced block"]),
    ],
)
def test_parse_rejections(tmp_path, response, words):
    _rejected(_from_response(tmp_path, response), ErrorKind.PARSE, *words)


# ------------------------------------------------------------------------------------------- allowlist


@pytest.mark.parametrize(
    "name, words",
    [
        ("../../etc/passwd", ["traversal"]),
        ("../CPUArgMax.cpp", ["traversal"]),
        ("source/../../CPUArgMax.cpp", ["traversal"]),
        ("/etc/passwd", ["absolute"]),
        ("/tmp/CPUArgMax.cpp", ["absolute"]),
        ("C:\\mnn\\CPUArgMax.cpp", ["backslash"]),
        ("..\\..\\CPUArgMax.cpp", ["backslash"]),
        ("CPUBackend.cpp", ["not allowed", "CPUArgMax.cpp"]),
        ("CMakeLists.txt", ["not allowed"]),
    ],
)
def test_bad_names_in_response(tmp_path, name, words):
    resp = f"```cpp\n// {name}\nint evil;\n```\n```cpp\n// CPUArgMax.cpp\nint ok;\n```\n"
    _rejected(_from_response(tmp_path, resp), ErrorKind.ALLOWLIST, *words)


@pytest.mark.parametrize(
    "name", ["../../etc/passwd", "/abs/CPUArgMax.cpp", "a\\CPUArgMax.cpp", "CPU ArgMax.cpp", "CPU$.cpp"]
)
def test_bad_names_in_files_object(tmp_path, name):
    p = tmp_path / "c.jsonl"
    p.write_text(
        json.dumps(
            {"task_id": "argmax_axis1", "sample_id": 1, "files": {name: "int x;", "CPUArgMax.cpp": "int y;"}}
        )
    )
    (res,) = load_candidates(CandidateSource(method="m", path=p), TASKS, MAX)
    _rejected(res, ErrorKind.ALLOWLIST)
    assert res.sample_id == "1"


def test_hpp_only_is_missing_file(tmp_path):
    _rejected(
        _from_response(tmp_path, "```cpp\n// CPUArgMax.hpp\nint x;\n```\n"), ErrorKind.MISSING_FILE, ".cpp"
    )


def test_huge_file(tmp_path):
    body = "int x;\n" * (MAX // 7 + 10)
    _rejected(
        _from_response(tmp_path, f"```cpp\n// CPUArgMax.cpp\n{body}```\n"),
        ErrorKind.FILE_TOO_LARGE,
        "CPUArgMax.cpp",
        str(MAX),
    )


def test_new_files_glob_for_composite(tmp_path):
    c = _from_response(tmp_path, "```cpp\n// OnnxBitwiseXor.cpp\nint x;\n```\n", task_id="bitwise_xor")
    assert isinstance(c, Candidate)
    assert c.placements(COMPOSITE) == {
        "tools/converter/source/optimizer/onnxextra/OnnxBitwiseXor.cpp": "int x;\n"
    }
    bad = _from_response(tmp_path, "```cpp\n// CPUBitwiseXor.cpp\nint x;\n```\n", task_id="bitwise_xor")
    _rejected(bad, ErrorKind.ALLOWLIST, "Onnx*.cpp")


# ------------------------------------------------------------------------------------------- JSONL


def test_jsonl_invalid_utf8_escapes_and_nul(tmp_path):
    p = tmp_path / "c.jsonl"
    lines = [
        # a lone surrogate escape: valid JSON, not encodable as UTF-8
        '{"task_id": "argmax_axis1", "sample_id": "a", "files": {"CPUArgMax.cpp": "int x; \\udcff"}}',
        '{"task_id": "argmax_axis1", "sample_id": "b", "files": {"CPUArgMax.cpp": "int x;\\u0000"}}',
        '{"task_id": "argmax_axis1", "sample_id": "c", "response": "```cpp\\n// CPUArgMax.cpp\\nint \\ud800;\\n```"}',
    ]
    raw = (
        "\n".join(lines).encode()
        + b'\n{"task_id": "argmax_axis1", "sample_id": "d", "files": {"CPUArgMax.cpp": "int \xff\xfe;"}}\n'
    )
    p.write_bytes(raw)
    a, b, c, d = load_candidates(CandidateSource(method="m", path=p), TASKS, MAX)
    _rejected(a, ErrorKind.NOT_UTF8, "UTF-8")
    _rejected(b, ErrorKind.NOT_UTF8, "NUL")
    _rejected(c, ErrorKind.NOT_UTF8)
    _rejected(d, ErrorKind.NOT_UTF8)
    assert d.origin.endswith("c.jsonl:4")
    assert len({a.sha256, b.sha256, c.sha256, d.sha256}) == 4


def test_jsonl_bad_line_raises_naming_file_and_line(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text(
        '{"task_id": "argmax_axis1", "sample_id": "0", "files": {"CPUArgMax.cpp": "int x;"}}\n\n{not json\n'
    )
    with pytest.raises(CandidateSourceError, match=r"c\.jsonl:3: not valid JSON"):
        load_candidates(CandidateSource(method="m", path=p), TASKS, MAX)


@pytest.mark.parametrize(
    "line, match",
    [
        ('["a", "b"]', "expected a JSON object"),
        ('{"sample_id": "0", "response": "x"}', "missing key 'task_id'"),
        ('{"task_id": "argmax_axis1", "response": "x"}', "missing key 'sample_id'"),
        ('{"task_id": "argmax_axis1", "sample_id": "../x", "response": "x"}', "sample_id"),
        ('{"task_id": 3, "sample_id": "0", "response": "x"}', "task_id must be"),
    ],
)
def test_jsonl_harness_errors(tmp_path, line, match):
    p = tmp_path / "c.jsonl"
    p.write_text(line + "\n")
    with pytest.raises(CandidateSourceError, match=match) as exc:
        load_candidates(CandidateSource(method="m", path=p), TASKS, MAX)
    assert "c.jsonl:1" in str(exc.value)


@pytest.mark.parametrize(
    "obj, words",
    [
        ({"response": "x", "files": {}}, ["exactly one"]),
        ({}, ["exactly one"]),
        ({"response": 5}, ["must be a string"]),
        ({"files": ["CPUArgMax.cpp"]}, ["'files' must be"]),
        ({"files": {"CPUArgMax.cpp": 1}}, ["'files' must be"]),
    ],
)
def test_jsonl_known_task_bad_content_is_rejection(tmp_path, obj, words):
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps({"task_id": "argmax_axis1", "sample_id": "0", **obj}) + "\n")
    (res,) = load_candidates(CandidateSource(method="m", path=p), TASKS, MAX)
    _rejected(res, ErrorKind.PARSE, *words)


def test_unknown_task_ids_rejected_and_counted(tmp_path, caplog):
    p = tmp_path / "c.jsonl"
    rows = [
        {"task_id": "nope", "sample_id": "0", "response": "x"},
        {"task_id": "nope", "sample_id": "1", "response": "x"},
        {"task_id": "other_split", "sample_id": "0", "response": "x"},
        {"task_id": "argmax_axis1", "sample_id": "0", "files": {"CPUArgMax.cpp": "int x;"}},
    ]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with caplog.at_level(logging.WARNING, logger="kit.candidates"):
        res = load_candidates(CandidateSource(method="m", path=p), TASKS, MAX, ignore_ids={"other_split"})
    assert [type(r).__name__ for r in res] == ["Rejection", "Rejection", "Candidate"]
    assert all("unknown task id 'nope'" in r.reason for r in res[:2])
    assert any("2 sample(s) name 1 unknown task id(s): nope" in m for m in caplog.messages)


def test_duplicate_identity_raises(tmp_path):
    p = tmp_path / "c.jsonl"
    row = {"task_id": "argmax_axis1", "sample_id": "0", "files": {"CPUArgMax.cpp": "int x;"}}
    p.write_text(json.dumps(row) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(CandidateSourceError, match=r"c\.jsonl:2: duplicate .*first at .*c\.jsonl:1"):
        load_candidates(CandidateSource(method="m", path=p), TASKS, MAX)


def test_missing_source_raises(tmp_path):
    with pytest.raises(CandidateSourceError, match="path not found: .*nowhere"):
        load_candidates(CandidateSource(method="m", path=tmp_path / "nowhere"), TASKS, MAX)


# ------------------------------------------------------------------------------------------- directories


def test_directory_source(tmp_path):
    root = tmp_path / "cands"
    good = root / "argmax_axis1" / "0"
    good.mkdir(parents=True)
    (good / "CPUArgMax.cpp").write_text("int x;\n")
    (good / "CPUArgMax.hpp").write_text("int y;\n")
    (good / ".DS_Store").write_bytes(b"\0junk")
    bad = root / "argmax_axis1" / "1"
    bad.mkdir()
    (bad / "CPUArgMax.cpp").write_bytes(b"int \xff;\n")
    big = root / "argmax_axis1" / "2"
    big.mkdir()
    (big / "CPUArgMax.cpp").write_bytes(b"x" * (MAX + 1))
    sub = root / "argmax_axis1" / "3"
    (sub / "nested").mkdir(parents=True)
    (sub / "CPUArgMax.cpp").write_text("int x;\n")
    link = root / "argmax_axis1" / "4"
    link.mkdir()
    (link / "CPUArgMax.cpp").symlink_to(good / "CPUArgMax.cpp")
    unk = root / "ghost" / "0"
    unk.mkdir(parents=True)
    (unk / "CPUArgMax.cpp").write_text("int x;\n")
    (root / "README.md").write_text("ignored")

    res = load_candidates(CandidateSource(method="dirm", path=root), TASKS, MAX)
    by = {(r.task_id, r.sample_id): r for r in res}
    assert len(res) == 6
    c = by[("argmax_axis1", "0")]
    assert isinstance(c, Candidate)
    assert c.files == {"CPUArgMax.cpp": "int x;\n", "CPUArgMax.hpp": "int y;\n"}
    assert c.origin == str(good)
    assert any(".DS_Store" in n for n in c.notes)
    _rejected(by[("argmax_axis1", "1")], ErrorKind.NOT_UTF8)
    _rejected(by[("argmax_axis1", "2")], ErrorKind.FILE_TOO_LARGE)
    _rejected(by[("argmax_axis1", "3")], ErrorKind.ALLOWLIST, "nested")
    _rejected(by[("argmax_axis1", "4")], ErrorKind.ALLOWLIST, "symbolic link")
    _rejected(by[("ghost", "0")], ErrorKind.PARSE, "unknown task id")


def test_sha256_depends_on_names_and_content():
    a = files_sha256({"A.cpp": "x", "B.hpp": "y"})
    assert a == files_sha256({"B.hpp": "y", "A.cpp": "x"})
    assert a != files_sha256({"A.cpp": "x\0B.hpp\0y"})
    assert a != files_sha256({"A.cpp": "y", "B.hpp": "x"})
    assert files_sha256({"A.cpp": "ab"}) != files_sha256({"A.cp": "pab"})


# ------------------------------------------------------------------------------------------- native


def test_native_candidate(tmp_path):
    cpu = tmp_path / "source" / "backend" / "cpu"
    cpu.mkdir(parents=True)
    (cpu / "CPUArgMax.hpp").write_text("// header\n")
    (cpu / "CPUArgMax.cpp").write_text("// source\n")
    c = native_candidate(ARGMAX, tmp_path)
    assert isinstance(c, Candidate)
    assert (c.method, c.sample_id) == ("native", "0")
    assert c.files == {"CPUArgMax.hpp": "// header\n", "CPUArgMax.cpp": "// source\n"}
    assert c.sha256 == files_sha256(c.files)

    r = native_candidate(COMPOSITE, tmp_path)
    _rejected(r, ErrorKind.NO_NATIVE, "no native files")

    (cpu / "CPUArgMax.cpp").unlink()
    with pytest.raises(FileNotFoundError, match="source/backend/cpu/CPUArgMax.cpp"):
        native_candidate(ARGMAX, tmp_path)


def test_jsonl_reports_every_bad_line_at_once(tmp_path):
    """A researcher fixing a broken JSONL should see all its bad lines in one run, each with its line number."""
    from kit.candidates import CandidateSourceError, load_candidates
    from kit.settings.config import CandidateSource

    p = tmp_path / "bad.jsonl"
    p.write_text('not json\n{"sample_id": "a"}\n[1, 2]\n{"task_id": "t", "sample_id": "../evil"}\n')
    with pytest.raises(CandidateSourceError) as ei:
        load_candidates(CandidateSource(method="m", path=p), {}, 1000)
    msg = str(ei.value)
    assert "4 invalid line(s)" in msg
    for n in (1, 2, 3, 4):
        assert f"bad.jsonl:{n}:" in msg
