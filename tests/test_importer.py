"""kit.suite.importer on problem files and ONNX models of our own (tests/import_fixtures): export in its own
process, reduction, left-out reasons, the loader and the audit on the result, the pinned official set."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from kit.suite.importer import Options, find_sources, import_sources
from kit.suite.importer.assemble import task_id
from kit.suite.importer.export import rewrite_constants, scalable_constants
from kit.suite.importer.official import PinError, Pins, load_pins, official_sources, verify
from kit.suite.importer.specs import infer_spec, widen
from kit.suite.listing import check_manifest
from kit.suite.tasks import load_suite

pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.slow]

FIX = Path(__file__).parent / "import_fixtures" / "problems"


def _onnx_models(folder: Path) -> list[Path]:
    """Two ONNX models of our own: TopK with two outputs, and a Neg behind an Identity (reduced away)."""
    folder.mkdir(parents=True, exist_ok=True)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 32])
    k = helper.make_tensor("k", TensorProto.INT64, [1], [5])
    topk = helper.make_graph([helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=1)], "topk", [x],
                             [helper.make_tensor_value_info("values", TensorProto.FLOAT, [4, 5]),
                              helper.make_tensor_value_info("indices", TensorProto.INT64, [4, 5])], [k])
    neg = helper.make_graph([helper.make_node("Identity", ["x"], ["t"]), helper.make_node("Neg", ["t"], ["y"])],
                            "neg", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 32])])
    paths = []
    for name, g in (("topk_two_outputs", topk), ("neg_identity", neg)):
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
        m.ir_version = 9
        onnx.save(m, folder / f"{name}.onnx")
        paths.append(folder / f"{name}.onnx")
    return paths


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """One import of every fixture (problems folder + ONNX models) into a fresh folder."""
    root = tmp_path_factory.mktemp("imp")
    models = _onnx_models(root / "models")
    out = root / "out"
    sources = find_sources([FIX, *models])
    opts = Options(budget_bytes=1 << 20, probe_native=True)
    report = import_sources(sources, out, opts, jobs=2, n_test=2)
    return out, report


def test_imported_tasks_load_and_match_the_manifest(imported):
    out, report = imported
    tasks = {t.id: t for t in load_suite(out)}
    assert sorted(tasks) == sorted(report.imported)
    assert {"tanh_single", "gemm_scaled", "relu_positive", "bitwise_xor", "abs_gpu_sized", "topk_two_outputs",
            "neg_identity"} <= set(tasks)
    assert check_manifest(out) == []
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["n_tasks"] == len(tasks)
    assert sum(1 for e in manifest["tasks"] if e["split"] == "test") == 2


def test_left_out_sources_have_their_reasons(imported):
    _, report = imported
    kinds = {src: kind for src, kind, _ in report.left_out}
    assert kinds == {"problems/swish_irreducible.py": "irreducible", "problems/broken_syntax.py": "bad_file",
                     "problems/no_get_inputs.py": "bad_file", "problems/needs_missing_pkg.py": "missing_package"}
    reasons = {src: why for src, _, why in report.left_out}
    assert "Sigmoid" in reasons["problems/swish_irreducible.py"]
    assert "get_inputs" in reasons["problems/no_get_inputs.py"]
    assert "mkb_no_such_package_xyz" in reasons["problems/needs_missing_pkg.py"]


def test_reduction_is_recorded(imported):
    out, _ = imported
    tasks = {t.id: t for t in load_suite(out)}
    gemm = tasks["gemm_scaled"]
    assert gemm.op_type == "Gemm" and any("alpha" in s for s in gemm.source.reductions)
    node = onnx.load(str(gemm.onnx_path)).graph.node
    assert [n.op_type for n in node] == ["Gemm"]
    assert {a.name: helper.get_attribute_value(a) for a in node[0].attribute}["alpha"] == pytest.approx(0.5)
    neg = tasks["neg_identity"]
    assert neg.op_type == "Neg" and any("Identity" in s for s in neg.source.reductions)
    assert neg.source.kind == "onnx" and neg.source.exporter == "given"


def test_inputs_two_outputs_and_scaling(imported):
    out, _ = imported
    tasks = {t.id: t for t in load_suite(out)}
    tanh = tasks["tanh_single"]
    assert (tanh.inputs[0].distribution, tanh.inputs[0].shape) == ("normal", [8, 32])
    assert tasks["relu_positive"].inputs[0].low == 0.0
    topk = tasks["topk_two_outputs"]
    assert [(o.name, o.dtype, o.shape) for o in topk.outputs] == [("values", "float32", [4, 5]),
                                                                   ("indices", "int64", [4, 5])]
    big = tasks["abs_gpu_sized"]
    assert big.source.scaled and big.source.budget_bytes == 1 << 20
    assert big.source.measured_bytes <= 1 << 20
    assert np.prod(big.inputs[0].shape) * 4 * 2 <= 1 << 20
    assert "batch_size = 4096" not in big.model_py_path.read_text()


def test_op_native_mnn_cannot_convert_is_a_marked_task(imported):
    out, _ = imported
    xor = {t.id: t for t in load_suite(out)}["bitwise_xor"]
    assert xor.op_type == "BitwiseXor" and xor.mechanism == "composite" and xor.mnn_op_types == ["*"]
    assert xor.source.native_converts is False
    assert "cannot convert" in xor.source.mapping_note


def test_the_audit_passes_and_marks_the_weak_task(imported):
    from kit.suite.audit import audit, failed
    from kit.suite.importer.weak import mark_weak, split_failures

    out, _ = imported
    df = audit(out, native=False)
    real, weak = split_failures(failed(df))
    assert real == []
    assert [t for t, _ in weak] == ["relu_positive"]
    assert mark_weak(out, df) == 1
    manifest = json.loads((out / "manifest.json").read_text())
    marks = {e["id"]: e["weak"] for e in manifest["tasks"]}
    assert marks["relu_positive"] == ["identity of input x"] and marks["tanh_single"] == []


def test_a_second_import_into_the_same_folder_is_refused(imported, tmp_path):
    from kit.suite.importer.problem import ImportFailure

    out, _ = imported
    with pytest.raises(ImportFailure, match="not empty"):
        import_sources(find_sources([FIX / "tanh_single.py"]), out, Options())


def test_a_relative_out_folder_works(tmp_path, monkeypatch):
    """``mkb tasks import FILE --out paper-tasks`` (relative, as the README writes it): the export process runs in
    its own work folder, so every path it is handed must be absolute."""
    from kit.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["tasks", "import", str(FIX / "tanh_single.py"), "--out", "rel", "--no-native", "--n-test", "0"]) == 0
    assert [t.id for t in load_suite(tmp_path / "rel")] == ["tanh_single"]


def test_scaling_rewrites_only_the_literal():
    src = "batch_size = 4096  # rows\ndim = 8\nk = 1\n\ndef get_inputs():\n    return [batch_size, dim, k]\n"
    assert scalable_constants(src) == {"batch_size": 4096, "dim": 8}
    assert rewrite_constants(src, {"batch_size": 256}).splitlines()[0] == "batch_size = 256  # rows"


def test_input_inference_and_widening():
    spec, _ = infer_spec("x", "float32", [4], {"n": 10000, "min": 0.0001, "max": 0.9999, "mean": 0.5, "std": 0.29,
                                               "kurtosis": 1.8})
    assert (spec.distribution, spec.low, spec.high) == ("uniform", 0.0, 1.0)
    assert (widen(spec).low, widen(spec).high) == (-1.0, 1.0)
    spec, _ = infer_spec("x", "float32", [4], {"n": 10000, "min": -4.0, "max": 4.1, "mean": 0.003, "std": 1.004,
                                               "kurtosis": 3.0})
    assert (spec.distribution, spec.low, spec.high) == ("normal", 0.0, 1.0)
    spec, _ = infer_spec("i", "int64", [4], {"n": 4, "min": 0, "max": 9})
    assert (spec.distribution, spec.low, spec.high) == ("integers", 0, 9)


def test_ids_are_snake_case_with_a_prefix():
    assert task_id("ConvTranspose_2D__asymmetric_input", "paper_") == "paper_convtranspose_2d_asymmetric_input"
    assert task_id("19_ReLU", "kb1_") == "kb1_19_relu"
    assert task_id("LogSoftmax") == "logsoftmax"


def test_official_pins_cover_the_papers_190_files():
    pins = load_pins()
    assert pins.repo == "zeezou-isee/QD-optimized-kernel-agent" and len(pins.commit) == 40
    per_cat: dict[str, int] = {}
    for rel in pins.files:
        per_cat[rel.split("/")[0]] = per_cat.get(rel.split("/")[0], 0) + 1
    assert len(pins.files) == 190 and len(per_cat) == 12
    assert sorted(per_cat.values()) == sorted([12, 8, 21, 13, 19, 12, 4, 15, 35, 28, 12, 11])


def test_a_checkout_that_differs_from_the_pins_is_refused(tmp_path):
    import hashlib

    (tmp_path / "Unary").mkdir()
    (tmp_path / "Unary" / "Abs.py").write_text("# ours\n")
    (tmp_path / "Unary" / "Extra.py").write_text("# ours too\n")
    good = hashlib.sha256(b"# ours\n").hexdigest()
    pins = Pins("o/r", "0" * 40, "d", "p_", {"Unary/Abs.py": good, "Unary/Neg.py": good})
    problems = verify(tmp_path, pins)
    assert problems == ["Unary/Neg.py: missing (pinned sha256 " + good[:12] + "...)", "Unary/Extra.py: not in the "
                        "pinned set"]
    (tmp_path / "Unary" / "Extra.py").unlink()
    (tmp_path / "Unary" / "Neg.py").write_text("# changed\n")
    with pytest.raises(PinError, match="Unary/Neg.py: sha256"):
        official_sources(tmp_path, pins)
    (tmp_path / "Unary" / "Neg.py").write_text("# ours\n")
    srcs = official_sources(tmp_path, pins)
    assert [(s.name, s.category, s.upstream) for s in srcs][0] == ("Unary/Abs.py", "unary", "o/r@" + "0" * 40
                                                                   + ":d/Unary/Abs.py")


def test_a_source_that_does_not_exist_is_named_as_missing(tmp_path):
    from kit.suite.importer.problem import ImportFailure

    with pytest.raises(ImportFailure, match="no such file or folder"):
        find_sources([tmp_path / "nosuch.onnx"])
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ImportFailure, match="not a .py problem file"):
        find_sources([tmp_path / "notes.txt"])
