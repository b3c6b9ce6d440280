"""Strict FCR on the real MNN 3.2.2 tree (runs only with MKB_MNN__SOURCE_DIR set): an ArgMax CPU Execution that
keeps the last maximum on ties (``candidates/edges/argmax_axis1_keep_4d/last_on_ties``) is ``ok`` on the task's
distribution, so FCR counts it, and fails its ``ties`` edge set, which native MNN passes, so strict FCR does not
and the task names the class.  Correctness only (``timing.enabled = false``); the native build is the kit's
cache's (``mnn.cache_dir``, default ~/.cache/mkb), made once."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest
from evalcfg import write_config

from kit.outline.evaluate import evaluate
from kit.results.shards import scan
from kit.score import metrics
from kit.settings.config import load_config

pytestmark = [pytest.mark.mnn, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
TASK = "argmax_axis1_keep_4d"


def test_last_maximum_on_ties_is_ok_for_fcr_and_fails_strict_fcr_on_the_real_tree(tmp_path):
    cands = tmp_path / "candidates"
    shutil.copytree(ROOT / "candidates" / "edges" / TASK / "last_on_ties", cands / TASK / "last_on_ties")
    # seeds 1 and 2: seed 0's draw has one tied maximum among its 12544 columns, which this kernel rightly fails
    cfg = load_config(write_config(
        tmp_path / "cfg.toml", run_dir=tmp_path / "run", tasks_dir=ROOT / "tasks", ids=[TASK], method="edges",
        candidates=cands, verify={"trials": 2, "seed": 1, "extra_threads": []}, timing={"enabled": False}))
    assert evaluate(cfg) == 0
    records = scan(cfg.run.dir).collect()
    (rec,) = records.iter_rows(named=True)
    assert rec["status"] == "ok", (rec["error_kind"], rec["error_message"], rec["trials"])  # right on the distribution
    sets = {e["name"]: e for e in rec["edge_sets"]}
    assert set(sets) == {"ties", "denormals", "size_one_axes", "empty_axes"}
    assert (sets["ties"]["ok"], sets["ties"]["native_ok"]) == (False, True), sets["ties"]
    assert "integer elements differ" in sets["ties"]["reason"]
    tasks = pl.DataFrame({"task_id": [TASK], "category": ["reduction"], "split": ["train"]})
    row = metrics.summary(records, tasks, ps=(1.0,)).row(0, named=True)
    assert (row["fcr"], row["fcr_strict"]) == (1.0, 0.0)
    assert metrics.per_task(records, tasks)["failed_edges"].to_list() == [["ties"]]
