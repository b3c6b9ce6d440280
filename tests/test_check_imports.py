"""`mkb check` starts without what only timing, shipping to other nodes or Ray need: scipy (the t quantile of a
speedup's interval), pyelftools (shipped artefacts), Ray.  The whole start-up path of a check runs here (every
module it imports at the top), ending at a candidate refused before any build, so no MNN tree is needed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: packages a correctness-only check never needs
HEAVY = {"scipy", "elftools", "ray", "torch", "matplotlib"}


def _imported(stderr: str) -> set[str]:
    """Top-level packages named in ``python -X importtime``'s report."""
    return {line.split("|")[-1].strip().split(".")[0] for line in stderr.splitlines() if line.startswith("import time:")}


def test_check_start_up_imports_no_timing_or_cluster_packages(tmp_path):
    files = sorted((ROOT / "candidates" / "sample" / "argmax_axis1_keep_4d" / "reject_name").iterdir())
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "kit.cli", "check", "--task", "argmax_axis1_keep_4d",
                          "--files", *map(str, files), "--no-timing"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300, env=_env(tmp_path))
    verdict = json.loads(out.stdout)
    assert verdict["status"] == "rejected_input" and verdict["timing"] == "not_timed"
    imported = _imported(out.stderr)
    # the report is real: the kit's own modules and the pipeline's are in it
    assert {"kit", "pydantic", "numpy"} <= imported
    assert not imported & HEAVY, sorted(imported & HEAVY)


def test_the_pipeline_modules_import_no_timing_or_cluster_packages():
    """What a run's worker imports for its jobs (pipeline, worker, stages) brings none of them either."""
    code = ("import sys, kit.job.pipeline, kit.job.worker, kit.stages.screen, kit.stages.timing, kit.host.shipping; "
            "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300, check=True)
    loaded = set(out.stdout.split())
    assert "kit" in loaded and not loaded & HEAVY, sorted(loaded & HEAVY)


def _env(tmp: Path) -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["MKB_MNN__CACHE_DIR"] = str(tmp / "cache")  # a rejected candidate makes no workspace; nothing is written
    return env
