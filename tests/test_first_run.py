"""The main job on a fresh machine: an empty HOME and no kit cache at all (``~/.cache/mkb`` and its parents
missing), sandboxed with bubblewrap and compiling through ccache, as the README's first command runs it.

The cache lies outside /tmp on purpose: the sandbox's private /tmp is a tmpfs, where a writable path left out
of the sandbox would still be writable (a throwaway folder) and a missing ccache directory would go unseen.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from evalcfg import write_config

from kit.host import proc, sandbox_check
from kit.outline.evaluate import evaluate
from kit.results.records import Status
from kit.results.shards import read_records
from kit.settings.config import load_config

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(sandbox_check.bwrap_works()), reason=f"runs sandboxed: {sandbox_check.bwrap_works()}"),
    pytest.mark.skipif(proc.which("ccache") is None, reason="ccache is not installed"),
]

TASK = "fx_argmax"
#: as every fixture task's samples end (tests/test_pipeline_fixture.py)
EXPECTED = {"correct": Status.OK.value, "compile_error": Status.COMPILE_ERROR.value,
            "wrong_result": Status.VERIFY_MISMATCH.value, "crash": Status.RUNTIME_CRASH.value}


@pytest.fixture
def fresh_home(monkeypatch):
    """An empty HOME outside /tmp (removed afterwards), with no XDG cache override."""
    home = Path(tempfile.mkdtemp(prefix="mkb-fresh-home-", dir="/var/tmp"))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    yield home
    shutil.rmtree(home, ignore_errors=True)


def test_the_main_job_runs_on_an_empty_home_and_cache(tmp_path, fresh_home, fixture_engine_pristine,
                                                      fixture_tasks_dir, fixture_candidates_dir):
    cache = fresh_home / ".cache" / "mkb"  # the default's place; none of it exists yet
    cfg_path = write_config(
        tmp_path / "cfg.toml", run_dir=tmp_path / "run", tasks_dir=fixture_tasks_dir, ids=[TASK], method="sample",
        candidates=fixture_candidates_dir / "sample",
        mnn={"engine": "fixture", "source_dir": fixture_engine_pristine, "cache_dir": cache, "check_tree": False},
        build={"jobs": 2, "ccache": True},
        verify={"trials": 2},
        timing={"warmup": 1, "iterations": 5, "rounds": 2},
        sandbox={"mode": "bwrap"})
    cfg = load_config(cfg_path)
    assert evaluate(cfg) == 0
    records = read_records(cfg.run.dir)
    got = {r["sample_id"]: r["status"] for r in records.iter_rows(named=True) if r["task_id"] == TASK}
    assert got == EXPECTED, records.select("sample_id", "status", "error_message").to_dicts()
    # the compiler cache is where the build's environment says, and the build filled it
    ccache_dir = cache / "ccache"
    assert ccache_dir.is_dir()
    stored = [p for p in ccache_dir.rglob("*") if p.is_file() and p.name.endswith(("R", "M"))]
    assert stored, sorted(str(p.relative_to(ccache_dir)) for p in ccache_dir.rglob("*"))
