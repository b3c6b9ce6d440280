"""Work moved out of the op's stamps on a real MNN 3.2.2 tree (issue 26's "done when"): the two escapes of
tests/adversarial/cases_accounting.py in their real-tree form (``REAL_CASES``: MNN's own ``CPUArgMax.cpp`` with the
case's code in, read from the tree at test time), three quarters of the ArgMax in ``onResize`` (the session
resized before every forward because the kernel changes its input's first dimension) and in the runner's before-op
callback (wrapped through the Express executor), through one ``mkb eval`` of ``argmax_last_2d`` beside the tree's
own kernel, sandboxed, at the default timing protocol (the accounting rules are statistics over its rounds; the
corpus's short protocol cannot carry them): no speedup for either, the honest kernel ``ok``.  Runs only with
MKB_MNN__SOURCE_DIR set; reuses the default native build cache.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from evalcfg import write_config

from kit.host import sandbox_check
from kit.outline.evaluate import evaluate
from kit.results.shards import read_records
from kit.settings.config import load_config

sys.path.insert(0, str(Path(__file__).parent / "adversarial"))
from cases_accounting import REAL_CASES  # noqa: E402
from checks import check_case  # noqa: E402
from corpus import HONEST, kernel  # noqa: E402

pytestmark = [
    pytest.mark.mnn,
    pytest.mark.slow,
    pytest.mark.skipif(bool(sandbox_check.bwrap_works()), reason=f"runs sandboxed: {sandbox_check.bwrap_works()}"),
]

ROOT = Path(__file__).resolve().parent.parent
TASK = "argmax_last_2d"


@pytest.fixture(scope="module")
def real_accounting_run(tmp_path_factory):
    src = os.environ.get("MKB_MNN__SOURCE_DIR")
    if not src:
        pytest.skip("needs a real MNN 3.2.2 tree: set MKB_MNN__SOURCE_DIR")
    tmp = tmp_path_factory.mktemp("accounting_mnn")
    for case in (HONEST, *REAL_CASES):
        d = tmp / "cands" / TASK / case.name
        d.mkdir(parents=True)
        for name, data in kernel(Path(src), case).items():
            (d / name).write_bytes(data)
    cfg_path = write_config(
        tmp / "cfg.toml", run_dir=tmp / "run", tasks_dir=ROOT / "tasks", ids=[TASK], method="adversarial",
        candidates=tmp / "cands", build={"candidate_timeout_s": 300},
        verify={"trials": 2, "extra_trials": 1, "run_timeout_s": 20, "memory_limit_mb": 2048},
        sandbox={"mode": "bwrap", "file_mb": 64})
    cfg = load_config(cfg_path)
    assert (cfg.timing.rounds_min, cfg.timing.rounds_max, cfg.timing.iterations) == (6, 10, 30)  # the default protocol
    assert evaluate(cfg) == 0
    return read_records(cfg.run.dir)


@pytest.mark.parametrize("case", REAL_CASES, ids=[c.name for c in REAL_CASES])
def test_work_outside_the_op_stamps_is_refused_on_the_real_tree(real_accounting_run, case):
    check_case(real_accounting_run, case, real=True)
    row = real_accounting_run.filter(real_accounting_run["sample_id"] == case.name).to_dicts()[0]
    assert row["speedup"] is None or row["status"] != "ok"


def test_the_honest_kernel_stays_ok_on_the_real_tree(real_accounting_run):
    check_case(real_accounting_run, HONEST, real=True)
