"""The mechanics of ``mkb tasks audit --config`` on the fixture engine (kit.outline.taskaudit): every task run on
the configured tree's native build, a task native gets wrong marked ``native_incorrect`` in the manifest with the
mismatch, the others not; ``--no-pinned`` leaves the marks alone.

The fixture's ArgMax ignores ``select_last_index`` (first maximum wins, as MNN): a task asking for the last
maximum on inputs with ties (integer-valued floats) is one the native build computes wrongly.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import onnx
import pytest
from conftest_fixture import FIXTURE_ROOT
from evalcfg import write_config

from kit.cli import main
from kit.suite.nativemarks import read_marks
from kit.suite.tasks import load_suite, sha256_file

pytestmark = pytest.mark.slow


def _last_index_task(tasks_dir: Path) -> None:
    """``fx_argmax_last``: the fixture's fx_argmax with ``select_last_index = 1`` and x drawn from {0, 1, 2}."""
    src, folder = tasks_dir / "reduction" / "fx_argmax", tasks_dir / "reduction" / "fx_argmax_last"
    shutil.copytree(src, folder)
    toml = (folder / "task.toml").read_text().replace('id = "fx_argmax"', 'id = "fx_argmax_last"')
    toml = toml.replace('distribution = "uniform"\nlow = -1.0\nhigh = 1.0', 'distribution = "integers"\nlow = 0.0\nhigh = 2.0')
    (folder / "task.toml").write_text(toml)
    model = onnx.load(folder / "model.onnx")
    model.graph.node[0].attribute.append(onnx.helper.make_attribute("select_last_index", 1))
    onnx.save(model, folder / "model.onnx")


def test_the_pinned_audit_marks_what_native_gets_wrong(tmp_path, fixture_engine_pristine, fixture_shared_cache):
    tasks_dir = tmp_path / "tasks"
    shutil.copytree(FIXTURE_ROOT / "tasks" / "reduction" / "fx_argmax", tasks_dir / "reduction" / "fx_argmax")
    _last_index_task(tasks_dir)
    tasks = load_suite(tasks_dir)
    entries = [{"id": t.id, "files": {n: sha256_file(t.path / n) for n in ("task.toml", "model.py", "model.onnx")}}
               for t in tasks]
    (tasks_dir / "manifest.json").write_text(json.dumps({"suite": "fixture", "tasks": entries}))
    cfg = write_config(tmp_path / "cfg.toml", run_dir=tmp_path / "run", tasks_dir=tasks_dir, ids=[], method="none",
                       candidates=tmp_path, mnn={"engine": "fixture", "source_dir": fixture_engine_pristine,
                                                 "cache_dir": fixture_shared_cache},
                       verify={"trials": 1, "extra_threads": []})
    args = ["tasks", "audit", "--dir", str(tasks_dir), "--no-torch", "--no-native", "--config", str(cfg)]
    main(args)  # exit 1: the ORT-side audit may fail fixture models (no model.py check); the marks are written
    marks = read_marks(tasks_dir)
    assert list(marks) == ["fx_argmax_last"]
    assert "trials failed" in marks["fx_argmax_last"] and "y:" in marks["fx_argmax_last"]
    manifest = json.loads((tasks_dir / "manifest.json").read_text())
    assert manifest["n_native_incorrect"] == 1
    # the ties set: native takes the first maximum, right for fx_argmax (nothing recorded), wrong for the other
    edges = {e["id"]: e.get("native_edges_failed") for e in manifest["tasks"]}
    assert edges == {"fx_argmax": None, "fx_argmax_last": ["ties"]}
    calibration = (tasks_dir / "calibration.csv").read_text()
    assert "pinned_ok" in calibration.splitlines()[0]
    assert "pinned_over_tolerance" in calibration.splitlines()[0]  # false here: ArgMax's indices are compared exactly

    (tasks_dir / "manifest.json").write_text(json.dumps({"suite": "fixture", "tasks": entries}))
    main([*args, "--no-pinned"])
    assert read_marks(tasks_dir) == {}
