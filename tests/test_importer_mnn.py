"""The importer's MNN mapping against a real MNN 3.2.2 tree: problem files of our own imported with
``mnn_root`` set map as the built-in suite maps the same op (Tanh: the atomic CPUUnary kernel, UnaryOp), every
file a candidate may replace exists in the tree, and an op outside the tree's converters stays a task, marked.
Runs only with MKB_MNN__SOURCE_DIR set."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kit.suite.importer import Options, find_sources, import_sources
from kit.suite.tasks import load_suite

pytest.importorskip("torch")
pytestmark = [pytest.mark.mnn, pytest.mark.torch, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "import_fixtures" / "problems"


@pytest.fixture(scope="module")
def mapped(tmp_path_factory):
    src = os.environ.get("MKB_MNN__SOURCE_DIR")
    if not src:
        pytest.skip("needs a real MNN 3.2.2 tree: set MKB_MNN__SOURCE_DIR")
    out = tmp_path_factory.mktemp("imp_mnn") / "out"
    files = [FIX / "tanh_single.py", FIX / "gemm_scaled.py", FIX / "bitwise_xor.py"]
    report = import_sources(find_sources(files), out, Options(budget_bytes=1 << 20, mnn_root=Path(src)), n_test=1)
    assert not report.left_out, report.left_out
    return Path(src), {t.op_type: t for t in load_suite(out)}


def test_an_op_of_the_suite_maps_as_the_built_in_task(mapped):
    _, tasks = mapped
    builtin = next(t for t in load_suite(ROOT / "tasks") if t.op_type == "Tanh")
    t = tasks["Tanh"]
    assert (t.mechanism, t.mnn_op_types, sorted(t.mnn.files)) == (builtin.mechanism, builtin.mnn_op_types,
                                                                  sorted(builtin.mnn.files))


def test_every_file_a_candidate_may_replace_is_in_the_tree(mapped):
    tree, tasks = mapped
    for t in tasks.values():
        assert t.mnn.files or t.mnn.new_files, t.id
        for rel in t.mnn.files:
            assert (tree / rel).is_file(), (t.id, rel)
        assert t.source is not None and t.source.mapping_note, t.id
