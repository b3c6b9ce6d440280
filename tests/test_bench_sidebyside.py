"""The side-by-side benchmark's parts (kit.bench.checkscost), cheaply: the kit of an older commit is exported with
its own default protocol, and each side's config loads in this kit with the protocol, workers and candidates
asked, and bad inputs are refused in one line naming them."""

from __future__ import annotations

import pytest

from kit.bench.checkscost import (
    BEFORE_ADAPTIVE,
    FIXED_TIMING,
    SideBySideError,
    _export,
    side_by_side,
    write_side_config,
)
from kit.bench.cli import main as bench_main
from kit.bench.common import ROOT, default_protocol
from kit.settings.config import load_config


@pytest.fixture(autouse=True)
def _fixture_engine(monkeypatch):
    monkeypatch.delenv("MKB_MNN__SOURCE_DIR", raising=False)


def test_each_side_runs_its_own_default_protocol(tmp_path):
    before = _export(BEFORE_ADAPTIVE, tmp_path / "before")
    assert (before / "kit" / "cli.py").is_file()
    assert default_protocol(before)["timing"]["rounds"] == 10  # the fixed protocol the figures were taken at
    now = default_protocol(ROOT)
    assert "rounds" not in now["timing"] and now["timing"]["rounds_max"] == 10 and now["verify"]["trials"] == 5
    path, run_dir = write_side_config(ROOT, tmp_path, "run0", False, now, 2, tmp_path / "cands")
    cfg = load_config(path)
    assert cfg.run.dir == run_dir == tmp_path / "run0" and cfg.mnn.cache_dir == tmp_path / "cache"
    assert (cfg.dispatch.mode, cfg.dispatch.workers) == ("ray", 2) and cfg.mnn.engine == "fixture"
    assert cfg.timing.rounds_min == now["timing"]["rounds_min"] and cfg.timing.stop_width == now["timing"]["stop_width"]
    assert [s.path for s in cfg.candidates.sources] == [tmp_path / "cands"] and not cfg.report.enabled


def test_the_checks_cost_config_is_the_fixed_protocol_serially(tmp_path):
    cfg = load_config(write_side_config(ROOT, tmp_path, "warm", False, FIXED_TIMING, 0)[0])
    assert cfg.dispatch.mode == "serial" and (cfg.timing.rounds_min, cfg.timing.rounds_max) == (10, 10)
    assert cfg.candidates.sources[0].path == ROOT / "tests" / "fixture_engine" / "candidates" / "sample"


def test_bad_inputs_are_refused_by_name_before_anything_runs(tmp_path, capsys):
    with pytest.raises(SideBySideError, match="protocol 'adaptive'"):
        side_by_side(1, BEFORE_ADAPTIVE, "adaptive")
    with pytest.raises(SideBySideError, match="--repeats 0"):
        side_by_side(0, BEFORE_ADAPTIVE, "own", 2)
    with pytest.raises(SideBySideError, match="--before deadbeef: git cannot export"):
        _export("deadbeef", tmp_path / "x")
    for argv, said in ((["--throughput", "--before", "deadbeef"], "--before deadbeef: git cannot export"),
                       (["--throughput", "--before", "default", "--workers", "abc"], "--workers 'abc'"),
                       (["--throughput", "--before", "default", "--workers", "0"], "must be at least 1"),
                       (["--checks-cost", "--repeats", "0"], "--repeats 0 must be at least 1")):
        with pytest.raises(SystemExit) as exc:
            bench_main(argv)
        assert exc.value.code == 2 and said in capsys.readouterr().err, argv
