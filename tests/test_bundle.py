"""``mkb bundle`` → ``mkb validate`` → ``mkb reproduce`` on the fixture engine, with the real pipeline.

One evaluation of two fixture tasks (8 candidates: correct, compile error, wrong result, crash) is bundled once
for the module; each test checks one property of that bundle, of a tampered copy, or of a reproduction.

The run carries a ``calibration.json`` whose per-task noise band is ln 2 (a factor of 2 either way): the
between-run noise of this shared 2-core test machine, where the fixture's best ArgMax speedup was 0.148x
[0.147, 0.150] in one run and 0.185x [0.11, 0.31] in the next (intervals over 3 rounds; with few rounds an
interval is narrow by chance).  A reviewer's band comes from ``mkb calibrate`` on their machine.
"""

from __future__ import annotations

import json
import math
import shutil
import tarfile
from pathlib import Path

import polars as pl
import pytest
from conftest_fixture import FIXTURE_ROOT, copy_fixture_engine
from evalcfg import write_config

from kit.bundle.archive import extract, write_archive
from kit.bundle.manifest import MANIFEST, METRICS, RECORDS, ROOT, file_hashes
from kit.cli import main
from kit.outline.evaluate import evaluate
from kit.results.shards import write_parquet_atomic
from kit.settings.config import load_config
from kit.suite.tasks import sha256_file

pytestmark = pytest.mark.slow

IDS = ["fx_exp", "fx_argmax"]


@pytest.fixture(scope="module")
def bundled(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bundle")
    engine = copy_fixture_engine(tmp / "engine")
    cfg = write_config(tmp / "cfg.toml", run_dir=tmp / "run", tasks_dir=FIXTURE_ROOT / "tasks", ids=IDS,
                       method="sample", candidates=FIXTURE_ROOT / "candidates" / "sample",
                       mnn={"engine": "fixture", "source_dir": engine, "cache_dir": tmp / "cache"},
                       verify={"trials": 2}, timing={"warmup": 1, "iterations": 10, "rounds": 2})
    assert evaluate(load_config(cfg)) == 0
    (tmp / "run" / "calibration.json").write_text(json.dumps({
        "summary": {"aa_speedup_p05": None, "aa_speedup_p95": None},
        "tasks": [{"task_id": t, "noise_log": math.log(2.0)} for t in IDS]}))
    bundle = tmp / "run.tar.gz"
    assert main(["bundle", str(tmp / "run"), "--out", str(bundle)]) == 0
    return {"tmp": tmp, "engine": engine, "bundle": bundle, "run": tmp / "run"}


def _mnn(b: dict, engine: Path | None = None) -> list[str]:
    return ["--mnn.source_dir", str(engine or b["engine"]), "--mnn.cache_dir", str(b["tmp"] / "cache")]


def test_bundle_validates_and_carries_the_run(bundled, tmp_path, capsys):
    assert main(["validate", str(bundled["bundle"])]) == 0
    assert "valid (8 records" in capsys.readouterr().out
    assert "calibration.json" in json.loads(extract(bundled["bundle"], tmp_path / "y").joinpath(MANIFEST).read_text())[
        "files"]
    root = extract(bundled["bundle"], tmp_path / "x")
    m = json.loads((root / MANIFEST).read_text())
    # every candidate file is in the bundle, byte for byte, and its sha256 in the manifest
    source = FIXTURE_ROOT / "candidates" / "sample"
    for tid in IDS:
        for f in (source / tid).rglob("*.?pp"):
            rel = f"candidates/sample/{f.relative_to(source).as_posix()}"
            assert m["files"][rel] == sha256_file(f) == sha256_file(root / rel)
    assert set(m["tasks"]) == set(IDS) and m["tasks"]["fx_exp"]["files"]["model.onnx"] == sha256_file(
        FIXTURE_ROOT / "tasks" / "unary" / "fx_exp" / "model.onnx")
    assert m["config_digest"] == load_config(bundled["tmp"] / "cfg.toml").digest()
    assert m["environment"]["engine"] == "fixture" and m["environment"]["image_digest"] is None
    assert m["environment"]["onnxruntime"] and m["environment"]["compiler"] != "unknown"
    assert {"cpu_model", "arch", "cpus", "kernel", "governor"} <= set(m["hosts"][0])
    assert len(m["kit"]["commit"]) == 40
    stored = {r["method"]: r for r in json.loads((root / METRICS).read_text())}
    assert stored["sample"]["csr"] == 1.0 and stored["sample"]["n_tasks"] == 2
    assert pl.read_parquet(root / RECORDS).height == m["n_records"] == 8


def test_a_zip_bundle_validates(bundled, tmp_path):
    out = tmp_path / "run.zip"
    assert main(["bundle", str(bundled["run"]), "--out", str(out)]) == 0
    assert out.read_bytes()[:2] == b"PK" and main(["validate", str(out)]) == 0


def _tamper(bundle: Path, dest: Path, edit, resign: bool = False) -> Path:
    """A copy of ``bundle`` with ``edit(root)`` applied; ``resign``: the manifest's hashes rewritten to match
    (a careful forger)."""
    root = extract(bundle, dest / "x")
    edit(root)
    if resign:
        m = json.loads((root / MANIFEST).read_text())
        m["files"] = file_hashes(root)
        (root / MANIFEST).write_text(json.dumps(m))
    return write_archive(root, dest / "tampered.tar.gz")


def _change_candidate(root: Path) -> None:
    f = root / "candidates/sample/fx_exp/correct/CPUUnary.cpp"
    data = bytearray(f.read_bytes())
    data[-2] ^= 0x20  # one byte
    f.write_bytes(bytes(data))


def _remove_record(root: Path) -> None:
    df = pl.read_parquet(root / RECORDS)
    write_parquet_atomic(df.filter(~((pl.col("task_id") == "fx_exp") & (pl.col("sample_id") == "crash"))),
                         root / RECORDS)


def _edit_metric(root: Path) -> None:
    rows = json.loads((root / METRICS).read_text())
    rows[0]["fcr"] = 0.5
    (root / METRICS).write_text(json.dumps(rows))


@pytest.mark.parametrize("edit, reason", [
    (_change_candidate, "candidates/sample/fx_exp/correct/CPUUnary.cpp: sha256"),
    (_remove_record, f"{RECORDS}: sha256"),
    (_edit_metric, f"{METRICS}: sha256"),
])
def test_a_tampered_bundle_is_rejected_with_the_reason(bundled, tmp_path, capsys, edit, reason):
    assert main(["validate", str(_tamper(bundled["bundle"], tmp_path, edit))]) == 1
    err = capsys.readouterr().err
    assert "REJECTED" in err and reason in err and "the file was changed" in err


@pytest.mark.parametrize("edit, reason", [
    (_change_candidate, "candidates: sample/fx_exp/correct: its bundled files give job id"),
    (_remove_record, "no record of job sample/fx_exp/crash"),
    (_edit_metric, "method 'sample': fcr is 0.5, recomputed from the records 1.0"),
])
def test_a_tampered_bundle_with_a_rewritten_manifest_is_rejected(bundled, tmp_path, capsys, edit, reason):
    assert main(["validate", str(_tamper(bundled["bundle"], tmp_path, edit, resign=True))]) == 1
    err = capsys.readouterr().err
    assert reason in err and "sha256" not in err  # only the content checks can see it


def test_an_archive_member_outside_the_bundle_is_refused(tmp_path, capsys):
    (tmp_path / "evil").write_text("x")
    with tarfile.open(tmp_path / "b.tar.gz", "w:gz") as tf:
        tf.add(tmp_path / "evil", f"{ROOT}/../evil")
    assert main(["validate", str(tmp_path / "b.tar.gz")]) == 2
    assert "outside" in capsys.readouterr().err


def test_reproduce_matches(bundled, tmp_path, capsys):
    run_dir = tmp_path / "rep"
    rc = main(["reproduce", str(bundled["bundle"]), "--run-dir", str(run_dir), *_mnn(bundled)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "verdict: reproduced (same hardware" in out
    # which between-run sd the speedups were compared with, and from where (no calibration here: the baseline
    # table both runs added native times to, or the default)
    assert "speedups compared across runs with between-run sd " in out
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["between_run"] and any(w in verdict["between_run"][0] for w in ("the default", "baseline table"))
    assert verdict["matches"] and verdict["same_hardware"] and not verdict["differences"]
    assert len(verdict["candidates"]) == 8
    assert all(c["compile"] == c["correct"] == "same" for c in verdict["candidates"])
    assert {c["speedup"] for c in verdict["candidates"] if c["bundle_status"] == "ok"} <= {"same", "within noise"}
    assert {r["metric"]: r["verdict"] for r in verdict["metrics"]}["fcr"] == "same"


def test_reproduce_refuses_tasks_that_differ(bundled, tmp_path, capsys):
    tasks = tmp_path / "tasks"
    shutil.copytree(FIXTURE_ROOT / "tasks", tasks)
    toml = tasks / "unary" / "fx_exp" / "task.toml"
    toml.write_text(toml.read_text().replace("atol = 1e-5", "atol = 1e-3"))
    rc = main(["reproduce", str(bundled["bundle"]), "--run-dir", str(tmp_path / "rep"), "--tasks-dir", str(tasks),
               *_mnn(bundled)])
    assert rc == 2 and "fx_exp: task.toml differ" in capsys.readouterr().err


def test_reproduce_names_a_candidate_whose_outcome_differs(bundled, tmp_path, capsys):
    # the reviewer's engine tree differs: its CPUUnary.hpp turns expf into the identity, so the correct Exp
    # candidate (which uses the tree's header) computes wrong values; nothing else changes
    engine = copy_fixture_engine(tmp_path / "engine")
    hpp = engine / "source/backend/cpu/CPUUnary.hpp"
    hpp.write_text(hpp.read_text().replace('#include "core/Execution.hpp"',
                                           '#include "core/Execution.hpp"\n#include <cmath>\n#define expf(x) (x)'))
    run_dir = tmp_path / "rep"
    assert main(["reproduce", str(bundled["bundle"]), "--run-dir", str(run_dir), *_mnn(bundled, engine)]) == 1
    out = capsys.readouterr().out
    assert "sample/fx_exp/correct: correctness correct in the bundle, verify_mismatch in the reproduction" in out
    verdict = json.loads((run_dir / "verdict.json").read_text())
    differing = [c for c in verdict["candidates"] if "different" in (c["compile"], c["correct"])]
    assert [(c["task_id"], c["sample_id"]) for c in differing] == [("fx_exp", "correct")]
    assert {r["metric"]: r["verdict"] for r in verdict["metrics"]}["fcr"] == "different"
    assert verdict["environment"][[e["key"] for e in verdict["environment"]].index("mnn_tree_digest")][
        "verdict"].startswith("differs")
