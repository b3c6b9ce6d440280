"""The pinned-tree audit on the real MNN tree (kit.outline.taskaudit): a Clip with only a max input is wrong on
MNN 3.2.2 (the missing min becomes FLT_MIN: every negative input clamps to about 0) and is marked
``native_incorrect``; a Clip with both bounds is not; the built-in GatherElements task's ``negative_indices`` edge
set is one native fails (recorded in the manifest beside the task, not a mark).

Uses the kit's cache (``mnn.cache_dir``, default ~/.cache/mkb): the native build is made once there.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from kit.outline.taskaudit import mark, pinned_rows
from kit.settings.config import load_config
from kit.suite.nativemarks import read_marks
from kit.suite.tasks import load_suite, sha256_file

pytestmark = pytest.mark.mnn

ROOT = Path(__file__).resolve().parent.parent


def clip_task(tasks_dir: Path, task_id: str, bounds: dict[str, float]) -> None:
    """A one-node Clip task (x: float32 [8, 64] uniform in [-1, 1)) with the constant bounds given (``min``,
    ``max``; a missing one is a skipped optional input)."""
    folder = tasks_dir / "activation" / task_id
    folder.mkdir(parents=True)
    inits = [numpy_helper.from_array(np.array(v, dtype=np.float32), k) for k, v in bounds.items()]
    node = helper.make_node("Clip", ["x", "min" if "min" in bounds else "", "max" if "max" in bounds else ""], ["y"])
    graph = helper.make_graph([node], task_id, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 64])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    onnx.save(model, folder / "model.onnx")
    (folder / "model.py").write_text("# not used by the pinned check\n")
    (folder / "task.toml").write_text(f"""id = "{task_id}"
category = "activation"
op_type = "Clip"
mechanism = "atomic"
split = "test"
mnn_op_types = ["ReLU6"]
[tolerance]
atol = 1e-4
rtol = 1e-4
reason = "exact op"
[[inputs]]
name = "x"
shape = [8, 64]
[[outputs]]
name = "y"
shape = [8, 64]
[mnn]
files = ["source/backend/cpu/CPURelu.cpp"]
""")


def test_clip_with_only_a_max_is_marked_native_incorrect_on_the_pinned_tree(tmp_path):
    tasks_dir = tmp_path / "tasks"
    clip_task(tasks_dir, "clip_max_only", {"max": 0.5})
    clip_task(tasks_dir, "clip_min_max", {"min": -0.5, "max": 0.5})
    shutil.copytree(ROOT / "tasks" / "tensor" / "gather_elements_axis1", tasks_dir / "tensor" / "gather_elements_axis1")
    tasks = load_suite(tasks_dir)
    manifest = {"suite": "mine", "tasks": [{"id": t.id, "files": {n: sha256_file(t.path / n) for n in (
        "task.toml", "model.py", "model.onnx")}} for t in tasks]}
    (tasks_dir / "manifest.json").write_text(json.dumps(manifest))
    cfg_path = tmp_path / "cfg.toml"
    cfg_path.write_text(f'[run]\ndir = "{tmp_path / "run"}"\n[tasks]\ndir = "{tasks_dir}"\n[verify]\ntrials = 2\n'
                        "extra_threads = []\n")
    cfg = load_config(cfg_path)
    df = pinned_rows(cfg, tasks)
    rows = {r["task_id"]: r for r in df.iter_rows(named=True)}

    bad = rows["clip_max_only"]
    assert bad["pinned_convert_ok"] and bad["pinned_ok"] is False and bad["native_incorrect"]
    assert "verify_mismatch" in bad["pinned_error"] and bad["pinned_max_abs_err"] > 0.5  # -1 clamped to ~0
    assert bad["pinned_version"] == cfg.mnn.version and bad["tolerance_reason"] == "exact op"
    good = rows["clip_min_max"]
    assert good["pinned_ok"] and not good["native_incorrect"] and good["pinned_max_abs_err"] == 0.0
    gather = rows["gather_elements_axis1"]
    assert gather["pinned_ok"] and "negative_indices" in gather["pinned_edges_failed"].split()

    assert mark(tasks_dir, df, cfg.mnn.version) == 1
    marks = read_marks(tasks_dir)
    assert list(marks) == ["clip_max_only"] and "trials failed" in marks["clip_max_only"]
    entries = {e["id"]: e for e in json.loads((tasks_dir / "manifest.json").read_text())["tasks"]}
    assert entries["gather_elements_axis1"]["native_edges_failed"] == ["negative_indices"]
    assert entries["clip_max_only"]["native_incorrect"]["mnn_version"] == cfg.mnn.version

