"""The paper's own task files on the real tree: a stratified handful of the pinned folder (one file per category,
``mkb tasks import --official DIR --per-category 1``) imported with the tree's converter files, audited
(``mkb tasks audit``), and one of them evaluated with the native candidate (the tree's own kernel) through the
whole pipeline.

Runs only with MKB_MNN__SOURCE_DIR (the MNN 3.2.2 tree) and MKB_TEST_OFFICIAL_DIR (a checkout of the pinned folder,
e.g. ``../shared/mobilekernelbench/dataset/Mobilekernelbench``; .ci/run sets both).  Uses the kit's cache
(``mnn.cache_dir``, default ~/.cache/mkb): the native baseline the main command built is reused.  Measured on the
2-core host under load: the import about 70 s, the audit about 10 s."""

from __future__ import annotations

import json
import os

import pytest

from kit.cli import main
from kit.outline.evaluate import evaluate
from kit.results.shards import scan
from kit.settings.config import load_config
from kit.suite.importer.official import load_pins, select

pytest.importorskip("torch")
pytestmark = [pytest.mark.mnn, pytest.mark.torch, pytest.mark.slow]

#: the paper's files the importer leaves out, and why (docs/import.md, "Measured")
KNOWN_LEFT_OUT = {"Binary/Mod.py": "irreducible", "Convolution/ConvolutionDepthwise.py": "irreducible",
                  "Others/Stft.py": "irreducible", "Others/ROIAlign.py": "missing_package",
                  "Tensor/Cast.py": "unsupported_output"}
#: the selected task evaluated with the native candidate (native MNN 3.2.2 converts and runs Mul)
EVALUATED = "paper_mul"


@pytest.fixture(scope="module")
def handful(tmp_path_factory):
    src, official = os.environ.get("MKB_MNN__SOURCE_DIR"), os.environ.get("MKB_TEST_OFFICIAL_DIR")
    if not src or not official:
        pytest.skip("needs MKB_MNN__SOURCE_DIR (an MNN 3.2.2 tree) and MKB_TEST_OFFICIAL_DIR (the pinned folder)")
    out = tmp_path_factory.mktemp("official") / "tasks"
    rc = main(["tasks", "import", "--official", official, "--per-category", "1", "--out", str(out),
               "--mnn-dir", src, "--jobs", "2"])
    assert rc == 0
    return out, json.loads((out / "manifest.json").read_text())


def test_one_file_per_category_is_imported_or_left_out_for_a_known_reason(handful):
    _, manifest = handful
    chosen = select(load_pins(), per_category=1)
    left = {e["source"]: e["kind"] for e in manifest["left_out"]}
    assert {t["source"] for t in manifest["tasks"]} | set(left) == set(chosen)
    assert all(KNOWN_LEFT_OUT.get(s) == k for s, k in left.items()), left
    assert manifest["n_tasks"] == len(chosen) - len(left) >= 11
    assert all(t["upstream"].startswith(f"{load_pins().repo}@") for t in manifest["tasks"])


def test_the_audit_passes(handful):
    out, _ = handful
    assert main(["tasks", "audit", "--dir", str(out)]) == 0


def test_a_paper_task_evaluates_with_the_native_candidate(handful, tmp_path):
    out, manifest = handful
    assert EVALUATED in {t["id"] for t in manifest["tasks"]}
    cfg_path = tmp_path / "native.toml"
    cfg_path.write_text(f"""
[run]
dir = "{tmp_path / 'run'}"
[tasks]
dir = "{out}"
split = "all"
ids = ["{EVALUATED}"]
[candidates]
native = true
[dispatch]
mode = "serial"
[report]
enabled = false
[verify]
trials = 3
[timing]
warmup = 5
iterations = 50
rounds = 2
""")
    cfg = load_config(cfg_path)
    assert evaluate(cfg) == 0
    (r,) = scan(cfg.run.dir).collect().iter_rows(named=True)
    assert (r["task_id"], r["method"], r["status"]) == (EVALUATED, "native", "ok"), r["error_message"]
    assert r["speedup"] is not None and r["speedup"] > 0
