"""The report's "Where the timings ran" section: timed records of a host, a Ray timing node and an adb device
(emulated), written through the real shard writer and rendered by the real report."""

from __future__ import annotations

import re

import polars as pl

from kit import report
from kit.report.places import place
from kit.results.records import DeviceState, ErrorKind, Record, Status
from kit.results.shards import ShardWriter

TASKS = pl.DataFrame({"task_id": ["activation_0", "activation_1"], "category": ["activation"] * 2,
                      "split": ["test"] * 2})


def _rec(method: str, task: str, sample: str, **kw) -> Record:
    timed = kw.pop("timed", True)
    ok = dict(status=Status.OK, error_kind=ErrorKind.NONE, speedup=1.2, speedup_ci_low=1.1, speedup_ci_high=1.3,
              native_ms=1.2, candidate_ms=1.0) if timed else dict(status=Status.COMPILE_ERROR,
                                                                      error_kind=ErrorKind.COMPILER)
    return Record(job_id=f"{method}/{task}/{sample}", method=method, task_id=task, sample_id=sample,
                  candidate_sha256="0" * 64, config_digest="cfg", category="activation", split="test",
                  started_at="2026-12-01T20:00:00Z", host="build-1", **ok, **kw)


def _phone() -> DeviceState:
    return DeviceState(serial="R5CT123", model="Pixel 8", soc="Tensor G3", abi="arm64-v8a", cores=[7],
                       cores_max_mhz=[2910.0], emulated=True)


def test_the_report_says_where_each_timed_record_was_timed(tmp_path):
    run = tmp_path / "run"
    recs = [
        _rec("m", "activation_0", "0", timing_device="host", timing_cores=[1]),
        _rec("m", "activation_1", "0", timing_device="ray:aarch64", timing_host="graviton-7", timing_cores=[0]),
        _rec("m", "activation_1", "1", timing_device="adb:R5CT123", device=_phone(), timing_emulated=True,
             timing_cores=[7]),
        _rec("m", "activation_0", "1", timing_device="qemu", timing_emulated=True),
        _rec("m", "activation_0", "2", timed=False, timing_device="host"),  # not timed: not counted
    ]
    with ShardWriter(run, "w0", flush_every=10) as w:
        for r in recs:
            w.append(r)
    paths = report.build_report([run], tmp_path / "out", TASKS, n_boot=50)
    html = paths.html.read_text()
    section = html.split("<h2>Where the timings ran</h2>", 1)[1].split("<h2>", 1)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", section.split("<tbody>", 1)[1])
    cells = [re.findall(r"<td>(.*?)</td>", r) for r in rows]
    by_place = {c[1]: c for c in cells}
    assert set(by_place) == {"host build-1", "Ray node graviton-7 (resource aarch64)",
                             "adb device Pixel 8 (Tensor G3), serial R5CT123", "host build-1, under qemu"}
    assert by_place["adb device Pixel 8 (Tensor G3), serial R5CT123"][2:6] == ["adb:R5CT123", "7", "yes (unscored)",
                                                                              "1"]
    assert by_place["host build-1"][3:6] == ["1", "no", "1"]  # the compile error is not a timed record
    assert by_place["host build-1, under qemu"][3:5] == ["any", "yes (unscored)"]
    assert "2 timed record(s) ran under emulation" in section
    assert "## Where the timings ran" in paths.markdown.read_text()
    # the speedup sections say why emulated timings are missing there
    for title in ("Per-task speedups", "Speedup distribution"):
        part = html.split(f"<h2>{title}</h2>", 1)[1].split("<h2>", 1)[0]
        assert "2 timed record(s) ran under emulation and are left out here" in part


def test_a_record_without_target_fields_was_timed_on_its_host():
    assert place({"host": "old-box"}) == "host old-box"
    assert place({"timing_device": "adb:X1", "device": None}) == "adb device ? (?), serial X1"
