"""Initial prompts (kit/suite/prompts.py) against a tiny fake MNN tree and, when available, the real one."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kit.candidates import parse_response
from kit.suite.prompts import (
    MECHANISM_HEADERS,
    PromptError,
    build_prompt,
    headers_for,
    one_shot,
    write_prompts,
)
from kit.suite.tasks import Task

MODEL_PY = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.argmax(x, dim=1)\n"


def _task(
    tmp_path: Path, tid: str, mechanism: str, category: str, files: list[str], new_files=(), keep=()
) -> Task:
    folder = tmp_path / "tasks" / category / tid
    folder.mkdir(parents=True)
    (folder / "model.py").write_text(MODEL_PY)
    return Task(
        id=tid,
        category=category,
        op_type="ArgMax",
        mechanism=mechanism,
        split="test",
        description="ArgMax over axis 1, keepdims=0.",
        mnn_op_types=["ArgMax"],
        tolerance={"atol": 0.0, "rtol": 0.0},
        inputs=[{"name": "x", "shape": [4, 8], "distribution": "normal", "low": 0.0, "high": 2.0}],
        outputs=[{"name": "y", "shape": [4], "dtype": "int64"}],
        mnn={"files": files, "new_files": list(new_files), "keep_symbols": list(keep)},
        path=folder,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A fake MNN tree: one small file per header the prompts use, plus a current kernel file."""
    root = tmp_path / "mnn"
    headers = {h for hs in MECHANISM_HEADERS.values() for h in hs} | {
        "source/math/Vec.hpp",
        "source/backend/cpu/UnaryUtils.hpp",
    }
    for rel in headers:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(
            f"//\n//  {p.name}\n//  banner to strip\n//\n\n#pragma once\nstruct Marker_{p.stem} {{}};\n"
        )
    cpu = root / "source" / "backend" / "cpu"
    (cpu / "CPUArgMax.hpp").write_text("#pragma once\nclass CPUArgMax;\n")
    body = "".join(f"int filler_{i} = {i};\n" for i in range(4000))
    (cpu / "CPUArgMax.cpp").write_text(
        '// banner\n#include "CPUArgMax.hpp"\n'
        + body
        + "REGISTER_CPU_OP_CREATOR(CPUArgMaxCreator, OpType_ArgMax);\nREGISTER_CPU_OP_CREATOR(CPUArgMaxCreator, OpType_ArgMin);\n"
    )
    return root


def test_atomic_prompt_sections(tmp_path, tree):
    t = _task(
        tmp_path,
        "argmax_axis1",
        "atomic",
        "reduction",
        ["source/backend/cpu/CPUArgMax.hpp", "source/backend/cpu/CPUArgMax.cpp"],
        keep=["CPUArgMax::CPUArgMax"],
    )
    p = build_prompt(t, tree)
    sections = [
        "# Role",
        "# Task",
        "# Constraints",
        "# MNN headers",
        "# Current implementation",
        "# Example",
        "# Target operator",
        "## PyTorch reference (model.py)",
        "## Inputs and outputs",
        "## Tolerance",
        "# Answer",
    ]
    positions = [p.index(s) for s in sections]
    assert positions == sorted(positions), "sections out of order"
    assert "expert in MNN CPU kernel development" in p
    assert "Allowed file names for this task: `CPUArgMax.hpp`, `CPUArgMax.cpp`" in p
    assert "REGISTER_CPU_OP_CREATOR(CPUArgMaxCreator, OpType_ArgMin)" in p.split("# MNN headers")[0]
    assert "`CPUArgMax::CPUArgMax`" in p
    assert "onResize" in p and "onAcquireBuffer" in p
    # headers of the mechanism and category, read from the tree, banners stripped
    for rel in MECHANISM_HEADERS["atomic"] + ("source/math/Vec.hpp",):
        assert f"## {rel}" in p
        assert f"struct Marker_{Path(rel).stem} {{}};" in p
    assert "banner to strip" not in p
    assert "source/geometry/GeometryComputer.hpp" not in p
    # the long current file is truncated with a marker, the model and the specs are embedded
    assert "truncated by the prompt builder" in p
    assert "int filler_3999" not in p
    assert MODEL_PY.strip() in p
    assert "| x | input | [4, 8] | float32 | normal(mean=0, std=2) |" in p
    assert "| y | output | [4] | int64 |" in p
    assert "atol = 0, rtol = 0" in p
    assert "ArgMax over axis 1, keepdims=0." in p


def test_one_shot_examples_parse_as_candidates():
    expected = {
        "atomic": {"CPUHardClip.hpp", "CPUHardClip.cpp"},
        "geometric": {"GeometryTranspose2D.cpp"},
        "composite": {"OnnxThresholdedRelu.cpp"},
    }
    for mech, names in expected.items():
        parsed = parse_response(one_shot(mech))
        assert set(parsed.files) == names, (mech, parsed.notes)
        assert not parsed.notes


@pytest.mark.parametrize(
    "mechanism, marker, other",
    [
        (
            "geometric",
            "GeometryComputer::registerGeometryComputer",
            "REGISTER_CPU_OP_CREATOR(CPUHardClipCreator",
        ),
        ("composite", "OnnxExtraManager::get()->insert", "REGISTER_GEOMETRY(GeometryTranspose2D"),
    ],
)
def test_mechanism_specific_prompt(tmp_path, tree, mechanism, marker, other):
    new = ["tools/converter/source/optimizer/onnxextra/Onnx*.cpp"] if mechanism == "composite" else []
    files = [] if mechanism == "composite" else ["source/backend/cpu/CPUArgMax.cpp"]
    t = _task(tmp_path, f"t_{mechanism}", mechanism, "tensor", files, new_files=new)
    p = build_prompt(t, tree)
    assert marker in p
    assert other not in p
    for rel in MECHANISM_HEADERS[mechanism]:
        assert f"## {rel}" in p
    assert "source/math/Vec.hpp" not in p  # category extras are for atomic kernels only
    if mechanism == "composite":
        assert "`Onnx*.cpp` (`*`: any name characters)" in p and "# Current implementation" not in p
        assert "e.g. `// OnnxArgMax.cpp`" in p


def test_missing_header_names_it(tmp_path, tree):
    (tree / "source" / "core" / "Concurrency.h").unlink()
    t = _task(tmp_path, "argmax_axis1", "atomic", "reduction", ["source/backend/cpu/CPUArgMax.cpp"])
    with pytest.raises(PromptError, match=r"header 'source/core/Concurrency.h' not found .*mnn\.source_dir"):
        build_prompt(t, tree)


def test_missing_current_file_and_tree(tmp_path, tree):
    t = _task(tmp_path, "argmax_axis1", "atomic", "reduction", ["source/backend/cpu/CPUNope.cpp"])
    with pytest.raises(PromptError, match="CPUNope.cpp"):
        build_prompt(t, tree)
    with pytest.raises(PromptError, match=r"MNN source tree not found: .*absent.*mnn\.source_dir"):
        build_prompt(t, tmp_path / "absent")


def test_missing_model_py(tmp_path, tree):
    t = _task(tmp_path, "argmax_axis1", "atomic", "reduction", ["source/backend/cpu/CPUArgMax.cpp"])
    t.model_py_path.unlink()
    with pytest.raises(PromptError, match="model.py not found"):
        build_prompt(t, tree)


def test_headers_exclude_own_files(tmp_path):
    t = _task(
        tmp_path,
        "conv",
        "atomic",
        "convolution",
        ["source/backend/cpu/CPUConvolution.hpp", "source/backend/cpu/CPUConvolution.cpp"],
    )
    assert "source/backend/cpu/CPUConvolution.hpp" not in headers_for(t)
    assert "source/math/Vec.hpp" in headers_for(t)


def test_write_prompts(tmp_path, tree):
    a = _task(tmp_path, "argmax_a", "atomic", "reduction", ["source/backend/cpu/CPUArgMax.cpp"])
    b = _task(tmp_path, "argmax_b", "atomic", "unary", ["source/backend/cpu/CPUArgMax.cpp"])
    out = tmp_path / "prompts"
    jsonl = write_prompts([a, b], tree, out)
    rows = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [r["task_id"] for r in rows] == ["argmax_a", "argmax_b"]
    assert rows[0]["prompt"] == (out / "argmax_a.md").read_text() == build_prompt(a, tree)
    assert "source/backend/cpu/UnaryUtils.hpp" in rows[1]["prompt"]
    assert sorted(p.name for p in out.iterdir()) == ["argmax_a.md", "argmax_b.md", "prompts.jsonl"]


def test_write_prompts_writes_nothing_on_error(tmp_path, tree):
    a = _task(tmp_path, "argmax_a", "atomic", "reduction", ["source/backend/cpu/CPUArgMax.cpp"])
    bad = _task(tmp_path, "argmax_b", "atomic", "reduction", ["source/backend/cpu/CPUMissing.cpp"])
    with pytest.raises(PromptError):
        write_prompts([a, bad], tree, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.mnn
@pytest.mark.skipif(not os.environ.get("MKB_MNN__SOURCE_DIR"), reason="MKB_MNN__SOURCE_DIR not set")
def test_real_tree_every_mechanism_and_category(tmp_path):
    root = Path(os.environ["MKB_MNN__SOURCE_DIR"])
    cases = [
        ("atomic", c, ["source/backend/cpu/CPUArgMax.hpp", "source/backend/cpu/CPUArgMax.cpp"], [])
        for c in ("unary", "binary", "convolution", "reduction")
    ] + [
        ("geometric", "tensor", ["source/geometry/GeometryTile.cpp"], []),
        ("composite", "activation", ["tools/converter/source/optimizer/onnxextra/OnnxHardSigmoid.cpp"], []),
        ("composite", "logic", [], ["tools/converter/source/optimizer/onnxextra/Onnx*.cpp"]),
    ]
    for i, (mech, cat, files, new) in enumerate(cases):
        t = _task(tmp_path, f"real_{i}", mech, cat, files, new_files=new)
        p = build_prompt(t, root)
        for rel in headers_for(t):
            assert f"## {rel}" in p
        if mech == "atomic":
            assert "class Execution" in p and "REGISTER_CPU_OP_CREATOR(CPUArgMaxCreator, OpType_ArgMax)" in p
        if mech == "geometric":
            assert "class GeometryComputer" in p and "REGISTER_GEOMETRY(GeometryTile, _create)" in p
        if mech == "composite":
            assert "class OnnxExtraManager" in p
        if files == ["tools/converter/source/optimizer/onnxextra/OnnxHardSigmoid.cpp"]:
            assert 'OnnxExtraManager::get()->insert("HardSigmoid", ...)' in p
        assert len(p) < 120_000
