"""A candidate that routes around its task's target op type on the real MNN 3.2.2 tree is caught: a
``GeometryLayernorm.cpp`` of our own (``tests/route_around/layernorm_last_3d/decomposed``) lowers the task's
layer normalization into MNN's native Reduction, BinaryOp and UnaryOp kernels (and Rasters to broadcast), so its
outputs match ONNX Runtime but no ``LayerNorm`` op executes; the native model runs one.  Through ``mkb eval`` on
``layernorm_last_3d`` its record is ``verify_mismatch`` / ``not_executed`` naming LayerNorm, while the tree's own
``GeometryLayernorm.cpp`` (read from the tree at test time, unchanged: the honest candidate) is ``ok``.

A third candidate shows the limit of the proof: the same decomposition plus one LayerNorm op on one row, its
output unused (a decoy), executes the target op type and so passes :func:`kit.stages.timing.check_executed`
(which compares op types, not the work done); what stops it winning is the timing basis, the whole model once
the sides' op-type counts differ.  Runs only with MKB_MNN__SOURCE_DIR set."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from evalcfg import write_config

from kit.outline.evaluate import evaluate
from kit.results.records import ErrorKind, Status
from kit.results.shards import scan
from kit.settings.config import load_config

pytestmark = [pytest.mark.mnn, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
TASK = "layernorm_last_3d"
FILE = "GeometryLayernorm.cpp"
DECOMPOSED = Path(__file__).resolve().parent / "route_around" / TASK / "decomposed" / FILE
#: inserted into the decomposed geometry before it points the output at its last tensor: a LayerNorm command over
#: the first row of x, into a tensor nothing reads
DECOY = """        {
            Tensor::InsideDescribe::Region first = TensorUtils::makeFullSlice(x);
            first.size[2] = inner;
            first.src.stride[0] = first.src.stride[1] = first.dst.stride[0] = first.dst.stride[1] = inner;
            auto oneRow = viewOf(x, {1, inner}, first, res);
            auto unused = scratch(x, {1, inner}, res);
            add(GeometryComputerUtils::makeLayerNorm(oneRow.get(), unused.get(), {-1}, param->epsilon(), {}, {}, {}));
        }
"""
DECOY_ANCHOR = "        auto des = TensorUtils::getDescribe(y);\n"


def candidates(tree: Path) -> dict[str, str]:
    """sample id → the text of its GeometryLayernorm.cpp: the tree's own (honest), ours, ours with the decoy."""
    ours = DECOMPOSED.read_text()
    assert ours.count(DECOY_ANCHOR) == 1
    return {"honest": (tree / "source/geometry" / FILE).read_text(), "decomposed": ours,
            "decoy": ours.replace(DECOY_ANCHOR, DECOY + DECOY_ANCHOR)}


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    src = os.environ.get("MKB_MNN__SOURCE_DIR")
    if not src:
        pytest.skip("needs a real MNN 3.2.2 tree: set MKB_MNN__SOURCE_DIR")
    tmp = tmp_path_factory.mktemp("route_around_mnn")
    for sample, text in candidates(Path(src)).items():
        d = tmp / "cands" / TASK / sample
        d.mkdir(parents=True)
        (d / FILE).write_text(text)
    cfg_path = write_config(
        tmp / "cfg.toml", run_dir=tmp / "run", tasks_dir=ROOT / "tasks", ids=[TASK], method="route_around",
        candidates=tmp / "cands", build={"jobs": 2, "candidate_timeout_s": 300},
        verify={"trials": 2, "extra_trials": 1}, timing={"warmup": 2, "iterations": 10, "rounds": 2})
    cfg = load_config(cfg_path)
    assert evaluate(cfg) == 0
    return {r["sample_id"]: r for r in scan(cfg.run.dir).collect().iter_rows(named=True)}


def test_a_geometry_that_decomposes_layernorm_is_not_executed_though_its_outputs_are_right(records):
    """Verification passes (every trial within the task's tolerance); the record is ``not_executed``, its message
    naming LayerNorm (which the native model runs once) and the native kernels that ran instead."""
    r = records["decomposed"]
    assert (r["status"], r["error_kind"]) == (Status.VERIFY_MISMATCH.value, ErrorKind.NOT_EXECUTED.value), r
    assert r["trials"] and all(t["ok"] for t in r["trials"])
    msg = r["error_message"]
    assert "the task's target op types ['LayerNorm'] did not execute" in msg, msg
    assert "(the native model runs LayerNorm x1)" in msg, msg
    ran = re.search(r"it ran (.*) per forward", msg)
    assert ran and re.fullmatch(r"BinaryOp x6, Raster x\d+, Reduction x2, UnaryOp x1", ran.group(1)), msg
    assert r["speedup"] is None and not r["candidate_samples_ms"]


def test_the_trees_own_geometry_is_ok_in_the_same_run(records):
    """The unchanged GeometryLayernorm.cpp runs the LayerNorm kernel: ``ok``, timed on the op itself."""
    r = records["honest"]
    assert r["status"] == Status.OK.value, r["error_message"]
    assert r["timing_basis"] == "op" and r["speedup"] is not None


def test_a_decoy_layernorm_passes_the_proof_and_is_timed_on_the_whole_model(records):
    """The known limit: a LayerNorm op on one row of 2048 is enough for check_executed, so the decoy is ``ok``
    (its outputs are right); its op-type counts differ from native's, so it is timed on the whole model, where the
    decomposition's own cost counts (how fast it comes out is the bench's to say, not a test's)."""
    r = records["decoy"]
    assert r["status"] == Status.OK.value, r["error_message"]
    assert r["timing_basis"] == "model" and r["speedup"] is not None
