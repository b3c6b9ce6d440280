"""The flag for a candidate that hands its op to another op's kernel (:mod:`kit.stages.delegation`), through the
screen's entry point (:func:`kit.stages.screen.check_sources`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import mnn_source_dir

from kit.stages import screen
from kit.stages.delegation import DELEGATES

# a native ArgMax file of our own, in the shape of MNN's: its header, the backend's, its own creator
NATIVE = """#include "backend/cpu/CPUArgMax.hpp"
#include "backend/cpu/CPUBackend.hpp"
namespace MNN {
ErrorCode CPUArgMax::onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) {
    return NO_ERROR;
}
class CPUArgMaxCreator : public CPUBackend::Creator {
    virtual Execution* onCreate(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                                const MNN::Op* op, Backend* backend) const override {
        return new CPUArgMax(backend, op->type() == OpType_ArgMin ? ARGMIN : ARGMAX);
    }
};
REGISTER_CPU_OP_CREATOR(CPUArgMaxCreator, OpType_ArgMax);
REGISTER_CPU_OP_CREATOR(CPUArgMaxCreator, OpType_ArgMin);
}
"""

# the same file, its onExecute running MNN's TopK kernel (K = 1) made through the backend
DELEGATING = NATIVE.replace('#include "backend/cpu/CPUBackend.hpp"', '#include "backend/cpu/CPUBackend.hpp"\n'
                            '#include "backend/cpu/CPUTopKV2.hpp"').replace("    return NO_ERROR;", """\
    flatbuffers::FlatBufferBuilder b;
    OpBuilder ob(b);
    ob.add_type(OpType_TopKV2);
    b.Finish(ob.Finish());
    std::unique_ptr<Execution> topk(backend()->onCreate(inputs, outputs, flatbuffers::GetRoot<Op>(b.GetBufferPointer())));
    return topk->onExecute(inputs, outputs);""")


def _delegation(flags):
    return [f for f in flags if f.code == DELEGATES]


def test_a_kernel_that_runs_another_ops_kernel_is_flagged_with_each_kind_of_evidence():
    flags = _delegation(screen.check_sources({"CPUArgMax.cpp": DELEGATING}, {"CPUArgMax.cpp": NATIVE}))
    assert len(flags) == 1
    reason = flags[0].reason
    assert "OpType_TopKV2" in reason and "onCreate" in reason and "CPUTopKV2.hpp" in reason
    assert "OpType_ArgMin" not in reason and "CPUBackend.hpp" not in reason  # the native file's own


@pytest.mark.parametrize("text", [
    NATIVE,
    NATIVE.replace("return NO_ERROR;", "float best = -FLT_MAX; (void)best; return NO_ERROR;"),
    NATIVE.replace('#include "backend/cpu/CPUBackend.hpp"',
                   '#include "backend/cpu/CPUBackend.hpp"\n#include "backend/cpu/CPUTensorConvert.hpp"'),
], ids=["unchanged", "own_loop", "utility_header"])
def test_a_kernel_of_its_own_is_not_flagged(text):
    assert _delegation(screen.check_sources({"CPUArgMax.cpp": text}, {"CPUArgMax.cpp": NATIVE})) == []


def test_each_kind_of_evidence_flags_on_its_own():
    only_type = NATIVE.replace("return NO_ERROR;", "return op->type() == OpType_Reduction ? NO_ERROR : NO_ERROR;")
    only_create = NATIVE.replace("return NO_ERROR;", "auto e = mBackend->onCreate(inputs, outputs, mOp); return NO_ERROR;")
    only_header = '#include "CPUPool.hpp"\n' + NATIVE
    for text, needle in ((only_type, "OpType_Reduction"), (only_create, "onCreate"), (only_header, "CPUPool.hpp")):
        flags = _delegation(screen.check_sources({"CPUArgMax.cpp": text}, {"CPUArgMax.cpp": NATIVE}))
        assert len(flags) == 1 and needle in flags[0].reason, (needle, flags)


def test_the_candidates_own_header_is_not_another_kernel():
    files = {"CPUArgMax.cpp": NATIVE.replace("CPUArgMax.hpp", "CPUArgMaxFast.hpp"), "CPUArgMaxFast.hpp": "#pragma once\n"}
    assert _delegation(screen.check_sources(files, {"CPUArgMax.cpp": NATIVE})) == []


@pytest.mark.mnn
def test_the_sample_sets_correct_candidates_are_not_flagged_against_the_real_tree():
    """The sample set's correct candidates (their own loops, MNN's helpers) against MNN 3.2.2's native files:
    no delegation flag; and the delegating edit of the real CPUArgMax.cpp is flagged."""
    tree = mnn_source_dir()
    sample = Path(__file__).resolve().parents[1] / "candidates" / "sample"
    checked = 0
    for folder in sorted(sample.glob("*/correct")):
        files = {p.name: p.read_text() for p in folder.iterdir() if p.is_file()}
        originals = {}
        for name in files:
            found = [p for p in (tree / "source").rglob(name)] + list((tree / "tools" / "converter").rglob(name))
            if len(found) == 1:
                originals[name] = found[0].read_text(errors="replace")
        if not originals:  # a file MNN 3.2.2 lacks (the BitwiseXor pass): nothing to compare with, no flag
            assert _delegation(screen.check_sources(files, originals)) == [], folder
            continue
        assert _delegation(screen.check_sources(files, originals)) == [], folder
        checked += 1
    assert checked >= 5
    native = (tree / "source" / "backend" / "cpu" / "CPUArgMax.cpp").read_text()
    edited = native.replace('#include "backend/cpu/CPUBackend.hpp"',
                            '#include "backend/cpu/CPUBackend.hpp"\n#include "backend/cpu/CPUTopKV2.hpp"')
    assert edited != native
    flags = _delegation(screen.check_sources({"CPUArgMax.cpp": edited}, {"CPUArgMax.cpp": native}))
    assert len(flags) == 1 and "CPUTopKV2.hpp" in flags[0].reason
