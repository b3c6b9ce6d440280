"""The adb-overhead benchmark (kit.bench.adbcost): which recorded adb commands are its raw steps, and one run of it
end to end on the fake device (real cross compiler, real qemu)."""

from __future__ import annotations

import json

import pytest
from crosstools import skip_without_cross_tools

from kit.bench import adbcost

S = ["-s", adbcost.SERIAL]


def test_the_raw_steps_are_the_pushes_runs_and_pulls_of_the_recorded_timing(tmp_path):
    root = "/data/local/tmp/mkb/vm-1-abc123"
    log = tmp_path / "adb.log"
    recorded = [
        ["-s", adbcost.SERIAL, "get-state"],
        [*S, "shell", f"( rm -rf {root}/j && mkdir -p {root}/j ); echo mkb_exit:$? >&2"],
        [*S, "push", "/tmp/x/cand/mkb_runner", f"{root}/j/f/0123/mkb_runner"],
        [*S, "push", "/tmp/x/inputs", f"{root}/j/d/4567"],
        [*S, "shell", f"mkdir -p {root}/j/r0/out && ... exec taskset 80 {root}/j/f/0123/mkb_runner --wait-go 1'"],
        [*S, "shell", "( cat /proc/stat ); echo mkb_exit:$? >&2"],  # the kit's load sample: bookkeeping
        [*S, "shell", "( sha256sum /data/... ); echo mkb_exit:$? >&2"],
        [*S, "pull", f"{root}/j/r0/out", "/tmp/x/scratch/c0/out"],
        ["devices"],
    ]
    log.write_text("".join(json.dumps(a) + "\n" for a in recorded))
    steps = adbcost._raw_steps(log, tmp_path)
    kinds = [(a[2], stdin) for a, stdin in steps]
    assert kinds == [("push", b""), ("push", b""), ("shell", b"go\n"), ("pull", b""), ("shell", b"")]
    assert steps[3][0][-1] == str(tmp_path / "pull7")  # pulled into a fresh folder of the benchmark's
    assert steps[-1][0] == [*S, "shell", f"rm -rf {root}/j"]


def test_a_log_without_pushes_is_refused(tmp_path):
    (tmp_path / "adb.log").write_text(json.dumps([*S, "get-state"]) + "\n")
    with pytest.raises(SystemExit, match="pushed nothing"):
        adbcost._raw_steps(tmp_path / "adb.log", tmp_path)


@pytest.mark.slow
def test_the_benchmark_runs_on_the_fake_device(capsys, monkeypatch):
    skip_without_cross_tools()
    monkeypatch.delenv("MKB_MNN__SOURCE_DIR", raising=False)
    monkeypatch.delenv("ADB_FAKE_HOME", raising=False)
    assert adbcost.adb_cost(None, 1) == 0
    out = capsys.readouterr().out
    assert "raw steps per candidate: 3 push, 20 runs (10 rounds x 2 sides), 20 pull, 1 rm" in out
    assert "ratio of medians kit / raw" in out and "per adjacent pair median" in out
