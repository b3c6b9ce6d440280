"""The fixture engine cross-built for aarch64, verified under qemu here and timed on a fake adb device (the
``adb`` of tests/fake_adb first on PATH; it runs the static runners under qemu-user, so its timings are
emulated): the sample set ends as on x86 with the device's state in every timed record; a device that vanishes
mid-run leaves ``timing_failed`` records (``device_lost``), the run finishes and a rerun times those jobs; an
over-loaded device is refused with the load; a hot one is waited for.  Real cross compiler, real qemu, the
kit's own adb client; only the phone is ours."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest
from conftest_fixture import FIXTURE_ROOT
from crosstools import skip_without_cross_tools
from evalcfg import write_config
from fake_adb.fakedev import install, make_device

from kit.baselines.table import read_table, table_path
from kit.devices.errors import DeviceLost
from kit.outline.evaluate import evaluate
from kit.results.shards import scan
from kit.settings.config import load_config

pytestmark = pytest.mark.slow

SERIAL = "FAKE0001"
#: the status of each fixture sample (by sample id), on every target
SAMPLE_EXPECTED = {"correct": "ok", "compile_error": "compile_error", "wrong_result": "verify_mismatch",
                   "crash": "runtime_crash"}


@pytest.fixture(scope="module")
def phone(tmp_path_factory):
    """The fake adb first on PATH and one fake phone; the cache (native builds) shared by the module's runs."""
    skip_without_cross_tools()
    tmp = tmp_path_factory.mktemp("device")
    bin_dir = tmp / "bin"
    install(bin_dir)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
        mp.setenv("ADB_FAKE_HOME", str(tmp / "phones"))
        mp.delenv("MKB_MNN__SOURCE_DIR", raising=False)
        mp.delenv("ANDROID_SERIAL", raising=False)
        yield tmp, make_device(tmp / "phones", SERIAL)


def _config(tmp: Path, engine: Path, name: str, ids: list[str], **device):
    path = write_config(
        tmp / f"{name}.toml", run_dir=tmp / name, tasks_dir=FIXTURE_ROOT / "tasks", ids=ids, method="sample",
        candidates=FIXTURE_ROOT / "candidates" / "sample",
        mnn={"engine": "fixture", "source_dir": engine, "cache_dir": tmp / "cache"}, build={"jobs": 2},
        verify={"trials": 2, "extra_trials": 1}, timing={"warmup": 1, "iterations": 4, "rounds": 2},
        target={"arch": "aarch64"},
        device={"kind": "adb", "serial": SERIAL, "load_sample_s": 0.2, "poll_s": 0.2, **device})
    return load_config(path)


def _by_sample(df: pl.DataFrame) -> dict[str, dict]:
    return {f"{r['task_id']}/{r['sample_id']}": r for r in df.iter_rows(named=True)}


@pytest.fixture(scope="module")
def sample_run(phone, fixture_engine_pristine):
    tmp, dev = phone
    cfg = _config(tmp, fixture_engine_pristine, "all", [])
    assert evaluate(cfg) == 0
    return cfg, dev, scan(cfg.run.dir).collect()


def test_sample_set_timed_on_the_device_ends_as_on_x86(sample_run):
    _, _, df = sample_run
    got = {k: r["status"] for k, r in _by_sample(df).items()}
    assert len(got) == 16
    assert {k: v for k, v in got.items() if v != SAMPLE_EXPECTED[k.split("/")[1]]} == {}


def test_timed_records_carry_the_device_state(sample_run):
    cfg, dev, df = sample_run
    assert set(df["timing_device"]) == {f"adb:{SERIAL}"} and cfg.digest() in set(df["config_digest"])
    ok = df.filter(pl.col("status") == "ok")
    assert ok.height == 4
    for r in ok.iter_rows(named=True):
        d = r["device"]
        assert (d["serial"], d["model"], d["soc"], d["android_release"], d["android_sdk"], d["abi"]) == \
            (SERIAL, "Fake Phone 8", "FAKE8G2", "14", 34, "arm64-v8a")
        # pinned to the prime core, the one of the highest cpuinfo_max_freq
        assert d["cores"] == [7] and r["timing_cores"] == [7] and d["cores_max_mhz"] == [3187.2]
        assert d["governor"] == r["cpu_governor"] == "schedutil" and d["freq_mhz"] == 3187.2
        assert d["temp_zone"] == "cpu-1-0-usr" and d["temp_c"] == 37.5
        assert (d["battery_pct"], d["charging"], d["battery_temp_c"]) == (87, True, 29.0)
        assert 0 <= d["load_pct"] <= 10 and d["load_1m"] == 0.42 and d["kernel"]
        # the fake says it is an emulator (ro.boot.qemu): measured, never scored
        assert d["emulated"] and r["timing_emulated"]
    assert df.filter(pl.col("status") != "ok")["device"].is_null().all()
    assert set(dev.masks()) == {"80"} and dev.runs >= 4 * 2 * 2 - 2 * 2  # fx_sub has no native side
    assert dev.sessions() == []  # the session's folder is removed when the worker is released


def test_a_device_that_vanishes_mid_run_leaves_timing_failed_and_the_rerun_resumes(phone, sample_run,
                                                                                    fixture_engine_pristine):
    tmp, dev = phone
    cfg = _config(tmp, fixture_engine_pristine, "vanish", ["fx_exp", "fx_argmax", "fx_transpose"])
    dev.set(vanish_at_run=dev.runs + 6)  # the second timed job's second run: 2 rounds x 2 sides each
    try:
        assert evaluate(cfg) == 0  # the run finishes
    finally:
        dev.set(state="device", vanish_at_run=None)
    first = _by_sample(scan(cfg.run.dir).collect())
    assert len(first) == 12
    correct = {k: r for k, r in first.items() if k.endswith("/correct")}
    assert sorted(r["status"] for r in correct.values()) == ["ok", "timing_failed", "timing_failed"]
    lost = [r for r in correct.values() if r["status"] == "timing_failed"]
    assert all(r["error_kind"] == "device_lost" and SERIAL in r["error_message"] for r in lost), lost
    assert all(r["trials"] for r in lost)  # built and verified: what was measured stands
    # the rerun times exactly the jobs the device left
    assert evaluate(cfg) == 0
    again = _by_sample(scan(cfg.run.dir).collect())
    assert {k: r["status"] for k, r in again.items()} == {k: SAMPLE_EXPECTED[k.split("/")[1]] for k in first}
    assert scan(cfg.run.dir, dedupe=False).collect().height == 12 + len(lost)


def test_an_overloaded_device_is_refused_with_its_load(phone, sample_run, fixture_engine_pristine):
    tmp, dev = phone
    cfg = _config(tmp, fixture_engine_pristine, "busy", ["fx_exp"], max_load_pct=10.0, load_wait_s=0.5)
    dev.set(load_pct=55.0)
    try:
        assert evaluate(cfg) == 0
    finally:
        dev.set(load_pct=2.0)
    r = _by_sample(scan(cfg.run.dir).collect())["fx_exp/correct"]
    assert r["status"] == "timing_failed" and r["error_kind"] == "device_busy", r["error_message"]
    # The fake device's load comes from /proc/stat jiffy deltas, so 55 % reads as 54.9 or 55.1.
    load = re.search(r"CPU load ([0-9.]+) %", r["error_message"])
    assert load and abs(float(load.group(1)) - 55.0) <= 2.0, r["error_message"]
    assert "device.max_load_pct = 10" in r["error_message"]


def test_a_hot_device_is_waited_for_and_the_wait_reported(phone, sample_run, fixture_engine_pristine):
    tmp, dev = phone
    cfg = _config(tmp, fixture_engine_pristine, "hot", ["fx_exp"], max_temp_c=45.0, cooldown_timeout_s=60.0)
    dev.heat(hot_c=80.0, cool_c_per_s=2.0)  # below 45 °C some 17 s from now, minus the build and verification
    try:
        assert evaluate(cfg) == 0
    finally:
        dev.set(zones=[{k: v for k, v in z.items() if k in ("type", "temp_c")} for z in dev.control()["zones"]])
    r = _by_sample(scan(cfg.run.dir).collect())["fx_exp/correct"]
    assert r["status"] == "ok", r["error_message"]
    assert r["device"]["temp_c"] <= 45.0 and r["device"]["cooldown_wait_s"] > 0


def test_a_missing_device_stops_the_run_before_any_build(phone, fixture_engine_pristine):
    tmp, _ = phone
    cfg = _config(tmp, fixture_engine_pristine, "missing", ["fx_exp"])
    cfg = cfg.model_copy(update={"device": cfg.device.model_copy(update={"serial": "NOSUCH"})})
    with pytest.raises(DeviceLost, match="'NOSUCH' is missing.*adb lists: FAKE0001 \\(device\\)"):
        evaluate(cfg)


def test_table_mode_on_the_device_uses_the_table_an_interleaved_run_filled(phone, sample_run, fixture_engine_pristine):
    """First run (interleaved) fills the table keyed by the device's fingerprint; the second
    (``baselines.native_timing = "table"``) times only the candidates against it, and its records say so."""
    tmp, dev = phone
    tables = tmp / "device-tables"
    fill = _config(tmp, fixture_engine_pristine, "fill", ["fx_exp"])
    fill = fill.model_copy(update={"baselines": fill.baselines.model_copy(update={"dir": tables})})
    assert evaluate(fill) == 0
    filled = _by_sample(scan(fill.run.dir).collect())["fx_exp/correct"]
    assert filled["status"] == "ok" and filled["native_timing"] == "interleaved"
    key = filled["baseline_key"]
    table = read_table(table_path(tables, key))
    assert table["task_id"].to_list() == ["fx_exp"]
    fp = json.loads(table["fingerprint"][0])
    assert (fp["device"], fp["model"], fp["soc"], fp["cores"]) == ("adb", "Fake Phone 8", "FAKE8G2", [7])
    runs_before = dev.runs
    use = fill.model_copy(update={"run": fill.run.model_copy(update={"dir": tmp / "use"}),
                                  "baselines": fill.baselines.model_copy(update={"native_timing": "table"})})
    assert evaluate(use) == 0
    r = _by_sample(scan(use.run.dir).collect())["fx_exp/correct"]
    assert r["status"] == "ok", r["error_message"]
    assert (r["native_timing"], r["baseline_key"], r["timing_device"]) == ("table", key, f"adb:{SERIAL}")
    assert r["native_samples_ms"] == [] and r["device"]["model"] == "Fake Phone 8"
    assert r["native_ms"] == pytest.approx(table["native_ms"][0])
    assert dev.runs - runs_before == use.timing.rounds  # the candidate's runs only, no native one
    assert json.loads((use.run.dir / "provenance.json").read_text())["baselines"]["key"] == key
    # another device (other cores) has no table: refused by name, not compared with this one's
    other = use.model_copy(update={"run": use.run.model_copy(update={"dir": tmp / "other"}),
                                   "device": use.device.model_copy(update={"cores": [0]})})
    assert evaluate(other) == 0
    miss = _by_sample(scan(other.run.dir).collect())["fx_exp/correct"]
    assert miss["status"] == "timing_failed" and miss["error_kind"] == "no_baseline", miss["error_message"]
    assert "no baseline table for this hardware" in miss["error_message"]
