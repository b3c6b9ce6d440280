"""The generated task suite (tasks/): counts, split, schema, single-node models, manifest, determinism."""

from __future__ import annotations

import json
import os
import re
from collections import Counter, defaultdict
from pathlib import Path

import onnx
import pytest

from kit.suite import builtin as suite
from kit.suite.listing import check_manifest, check_selected, list_tasks, read_manifest
from kit.suite.tasks import CATEGORIES, TaskError, load_suite

TASKS = Path(__file__).resolve().parents[1] / "tasks"


@pytest.fixture(scope="module")
def tasks():
    return load_suite(TASKS)


def test_task_counts_per_category_match_table3(tasks):
    per_cat = Counter(t.category for t in tasks)
    ops: dict[str, set[str]] = defaultdict(set)
    for t in tasks:
        ops[t.category].add(t.op_type)
    assert len(tasks) == 190
    for cat, (min_ops, n_tasks) in suite.TABLE3.items():
        assert per_cat[cat] == n_tasks, cat
        assert len(ops[cat]) >= min_ops, cat
    assert sum(len(v) for v in ops.values()) == 95


def test_95_distinct_ops_each_in_one_category(tasks):
    cats_of_op: dict[str, set[str]] = defaultdict(set)
    for t in tasks:
        cats_of_op[t.op_type].add(t.category)
    assert len(cats_of_op) == 95
    assert {op: c for op, c in cats_of_op.items() if len(c) > 1} == {}


def test_split_40_test_stratified(tasks):
    test = [t for t in tasks if t.split == "test"]
    assert len(test) == 40
    quota = suite.test_quota(suite.all_defs())
    assert Counter(t.category for t in test) == Counter({c: n for c, n in quota.items() if n})
    for c in CATEGORIES:
        n = sum(1 for t in tasks if t.category == c)
        # proportional within one task
        assert abs(quota[c] - 40 * n / 190) < 1, c
    manifest = read_manifest(TASKS)
    assert manifest["split"]["seed"] == suite.SPLIT_SEED
    assert {e["id"]: e["split"] for e in manifest["tasks"]} == {t.id: t.split for t in tasks}


def test_split_is_deterministic_and_seed_dependent():
    defs = suite.all_defs()
    assert suite.assign_splits(defs) == suite.assign_splits(defs)
    assert suite.assign_splits(defs, seed=1) != suite.assign_splits(defs)


def test_every_model_is_one_node_of_its_op(tasks):
    for t in tasks:
        m = onnx.load(str(t.onnx_path))
        assert [n.op_type for n in m.graph.node] == [t.op_type], t.id
        assert {o.domain: o.version for o in m.opset_import} == {"": 20}, t.id
        inits = {i.name for i in m.graph.initializer}
        assert [i.name for i in m.graph.input] == [s.name for s in t.inputs], t.id
        assert not inits & {s.name for s in t.inputs}, t.id
        assert [o.name for o in m.graph.output] == [s.name for s in t.outputs], t.id


def test_model_py_is_valid_python_in_kernelbench_format(tasks):
    for t in tasks:
        src = t.model_py_path.read_text(encoding="utf-8")
        compile(src, str(t.model_py_path), "exec")  # syntax only: torch is not needed here
        for name in ("class Model(nn.Module)", "def forward(", "def get_inputs()", "def get_init_inputs()"):
            assert name in src, (t.id, name)


def test_mechanism_and_targets_are_consistent(tasks):
    for t in tasks:
        if t.mechanism == "composite":
            assert t.mnn.new_files, t.id
        else:
            assert t.mnn.files and "*" not in t.mnn_op_types, t.id
        if t.mechanism == "atomic":
            assert any(f.startswith("source/backend/cpu/") for f in t.mnn.files), t.id
        if t.mechanism == "geometric":
            assert any(f.startswith("source/geometry/") for f in t.mnn.files), t.id


def test_manifest_hashes_match_files():
    assert check_manifest(TASKS) == []
    manifest = read_manifest(TASKS)
    assert manifest["n_tasks"] == 190 and manifest["n_ops"] == 95


def test_check_manifest_detects_an_edited_file(tmp_path):
    import shutil

    for c in ("unary",):
        shutil.copytree(TASKS / c, tmp_path / c)
    m = read_manifest(TASKS)
    m["tasks"] = [e for e in m["tasks"] if e["category"] == "unary"]
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    assert check_manifest(tmp_path) == []
    victim = tmp_path / "unary" / "abs_1d" / "model.py"
    victim.write_text(victim.read_text() + "\n# edited\n")
    assert check_manifest(tmp_path) == ["abs_1d: model.py sha256 differs from manifest.json"]


def test_a_run_checks_only_its_own_tasks_against_the_manifest(tmp_path):
    """check_selected (what eval and calibrate call): True for untouched tasks, a TaskError naming an edited one
    only when that task is selected, False for a folder without a manifest."""
    import shutil

    shutil.copytree(TASKS / "unary", tmp_path / "unary")
    m = read_manifest(TASKS)
    m["tasks"] = [e for e in m["tasks"] if e["category"] == "unary"]
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    model = tmp_path / "unary" / "abs_1d" / "model.onnx"
    model.write_bytes(model.read_bytes() + b"\0")
    others = [t for t in load_suite(tmp_path) if t.id != "abs_1d"]
    assert check_selected(tmp_path, others) is True
    with pytest.raises(TaskError, match=r"changed since it was written: abs_1d: model.onnx sha256 differs"):
        check_selected(tmp_path, load_suite(tmp_path, ids=["abs_1d"]))
    (tmp_path / "manifest.json").unlink()
    assert check_selected(tmp_path, load_suite(tmp_path)) is False


def test_list_tasks_rows():
    rows = list_tasks(TASKS, split="test")
    assert len(rows) == 40
    assert all(r["split"] == "test" for r in rows)
    assert set(rows[0]) >= {"id", "category", "op_type", "mechanism", "inputs", "atol", "mnn_op_types"}
    assert [r["category"] for r in rows] == sorted((r["category"] for r in rows), key=CATEGORIES.index)
    with pytest.raises(Exception, match="unknown category"):
        list_tasks(TASKS, category="nope")


@pytest.mark.slow
def test_generate_is_deterministic(tmp_path):
    suite.generate(tmp_path)
    from kit.suite.nativemarks import without_marks

    ours = read_manifest(tmp_path)
    theirs = read_manifest(TASKS)
    assert ours == without_marks(theirs)  # the audit's marks are its own, not generation's
    assert (tmp_path / "README.md").read_text() == (TASKS / "README.md").read_text()


def test_observed_toml_is_what_the_probe_writes():
    from kit.suite.mnn_targets import OBSERVED, OBSERVED_TOML, PROBE
    from kit.suite.tomlw import dumps_observed

    assert set(OBSERVED) == {d.id for d in suite.all_defs()}
    text = dumps_observed(OBSERVED, converter=PROBE["converter"], runtime=PROBE["runtime"])
    assert text == OBSERVED_TOML.read_text(encoding="utf-8")


@pytest.mark.mnn
def test_mnn_files_exist_and_keep_symbols_are_defined(tasks):
    root = os.environ.get("MKB_MNN__SOURCE_DIR")
    if not root:
        pytest.skip("MKB_MNN__SOURCE_DIR is not set")
    root_p = Path(root)
    for t in tasks:
        texts = []
        for f in t.mnn.files:
            assert (root_p / f).is_file(), (t.id, f)
            texts.append((root_p / f).read_text(errors="replace"))
        for sym in t.mnn.keep_symbols:
            ident = re.split(r"::|\(", sym)[-2 if "(" in sym else -1] if "::" in sym else sym.split("(")[0]
            assert any(ident in s for s in texts), (t.id, sym)
        for pattern in t.mnn.new_files:
            assert (root_p / pattern).parent.is_dir(), (t.id, pattern)
