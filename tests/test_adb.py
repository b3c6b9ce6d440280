"""The kit's adb client against the fake adb device (tests/fake_adb), the device state's parsers, the device
session's checks, and the ``[device]`` config section."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from fake_adb.fakedev import install, make_device

from kit.devices import remote
from kit.devices import state as dstate
from kit.devices.adb import Adb, status_of, wrap
from kit.devices.errors import AdbMissing, DeviceBusy, DeviceError, DeviceLost, DeviceMismatch
from kit.devices.session import DeviceSession
from kit.host import proc
from kit.settings.config import ConfigError, load_config
from kit.settings.device import DeviceSection


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """(adb client, fake device) with the fake's devices in ``tmp_path/phones``."""
    monkeypatch.setenv("ADB_FAKE_HOME", str(tmp_path / "phones"))
    monkeypatch.delenv("ANDROID_SERIAL", raising=False)
    adb = install(tmp_path / "bin")
    dev = make_device(tmp_path / "phones", "FAKE0001")
    return Adb.find(str(adb), "FAKE0001", timeout_s=30), dev


def test_shell_returns_the_scripts_exit_status_and_its_streams_apart(fake):
    adb, _ = fake
    r = adb.shell("echo out; echo err >&2; exit 7")
    assert (r.status, r.stdout, r.stderr) == (7, "out\n", "err\n")
    assert adb.shell("true").status == 0


def test_the_status_is_read_from_the_last_mark_as_on_an_adb_without_exit_codes():
    # an older adb merges stderr into stdout and exits 0: the wrapped script's own line says how it ended
    assert status_of("mkb_exit:0\nnoise\nmkb_exit:3\n") == 3 and status_of("no mark") is None
    assert wrap("exit 4").endswith("echo mkb_exit:$? >&2")


def test_push_and_pull_copy_files_and_folders(fake, tmp_path):
    adb, dev = fake
    src = tmp_path / "src"
    (src / "0").mkdir(parents=True)
    (src / "0" / "x.bin").write_bytes(b"\x00\x01")
    adb.push(src, "/data/local/tmp/t/in")  # a folder onto a path that does not exist yet: its contents there
    assert (dev.root / "data/local/tmp/t/in/0/x.bin").read_bytes() == b"\x00\x01"
    out = adb.shell("sha256sum /data/local/tmp/t/in/0/x.bin").stdout
    assert out.split()[1] == "/data/local/tmp/t/in/0/x.bin"  # the device's paths, not the fake's folder
    adb.pull("/data/local/tmp/t/in", tmp_path / "back")
    assert (tmp_path / "back" / "0" / "x.bin").read_bytes() == b"\x00\x01"
    with pytest.raises(DeviceError, match="failed to stat remote object"):
        adb.pull("/data/local/tmp/none", tmp_path / "none")


def test_devices_and_states(fake):
    adb, dev = fake
    assert adb.devices() == {"FAKE0001": "device"} and adb.state() == "device"
    adb.check()
    dev.set(state="unauthorized")
    assert adb.state() == "unauthorized"
    with pytest.raises(DeviceLost, match="unauthorized: accept the 'Allow USB debugging' prompt"):
        adb.check()
    dev.set(state="offline")
    with pytest.raises(DeviceLost, match="is offline"):
        adb.check()
    dev.set(state="gone")
    with pytest.raises(DeviceLost, match="'FAKE0001' is missing.*adb lists: none"):
        adb.shell("true")


def test_a_missing_adb_is_named():
    with pytest.raises(AdbMissing, match="device.adb = 'no-such-adb-here'"):
        Adb.find("no-such-adb-here", "X")


def test_a_hung_shell_times_out_and_never_hangs(fake):
    adb, _ = fake
    t0 = time.monotonic()
    with pytest.raises(DeviceLost, match="did not finish within 1 s"):
        adb.shell("sleep 30", timeout_s=1)
    assert time.monotonic() - t0 < 20  # killed at its timeout (plus the kill's grace), not after 30 s


def test_device_state_is_read_and_parsed(fake):
    adb, dev = fake
    from kit.devices.session import read_state

    raw = read_state(adb)
    assert raw.props["ro.product.model"] == "Fake Phone 8" and raw.emulated and raw.kernel == os.uname().release
    assert [c.max_khz for c in raw.cpus] == [2016000] * 3 + [2803200] * 4 + [3187200]
    assert dstate.big_cores(raw.cpus, 1) == (7,) and dstate.big_cores(raw.cpus, 3) == (5, 6, 7)
    assert dstate.hottest(raw.zones) == (37.5, "cpu-1-0-usr")
    dev.set(load_pct=40.0)
    time.sleep(0.3)
    after = dstate.parse_stat(adb.shell(dstate.STAT_SCRIPT).stdout.strip())
    assert dstate.busy_pct(raw.stat, after) == pytest.approx(40.0, abs=2.0)


def test_parsers_on_what_phones_print():
    assert dstate.temp_celsius("45300") == 45.3 and dstate.temp_celsius("41") == 41.0
    assert dstate.temp_celsius("-273000") is None and dstate.temp_celsius("n/a") is None
    assert dstate.hottest((("battery", 30.0), ("skin", 33.0))) == (33.0, "skin")  # no CPU zone: every zone
    assert dstate.battery({"ac powered": "false", "usb powered": "false", "status": "3", "level": "40",
                           "scale": "50", "temperature": "315"}) == (80, False, 31.5)
    assert dstate.battery({}) == (None, None, None)
    assert dstate.busy_pct((10, 0, 10, 80, 0, 0, 0, 0), (20, 0, 20, 160, 0, 0, 0, 0)) == 20.0
    assert dstate.busy_pct((1, 0, 0, 1, 0), (1, 0, 0, 1, 0)) is None
    cpus = (dstate.Cpu(0, 1800000, None, "", True), dstate.Cpu(1, 1800000, None, "", False))
    with pytest.raises(ValueError, match="1 online core"):
        dstate.big_cores(cpus, 2)
    assert dstate.parse_cpu("3 - - - 1") == dstate.Cpu(3, None, None, "", True)


def test_a_run_is_pinned_by_a_mask_its_arguments_kept_and_its_status_printed_last(fake, tmp_path):
    adb, dev = fake
    prog = tmp_path / "r"
    prog.write_text('#!/bin/sh\nfor a in "$@"; do echo "arg:$a"; done\nexit 5\n')
    adb.push(prog, "/data/local/tmp/r")
    script = remote.run_script(["/data/local/tmp/r", "m", "--op-types", "*", "a b"], "/data/local/tmp/run", (4, 7),
                               1 << 30)
    res = proc.run(adb.argv("shell", script), env=adb.env, timeout_s=30)
    assert [line for line in res.stdout.splitlines() if line.startswith("arg:")] == \
        ["arg:m", "arg:--op-types", "arg:*", "arg:a b"]  # no glob, no word splitting on the device
    assert status_of(res.stderr) == 5 and "mkb_pid:" in res.stderr
    assert dev.masks() == ["90"] and (dev.root / "data/local/tmp/run/out").is_dir()
    assert remote.core_mask((0,)) == "1" and remote.core_mask((6, 7)) == "c0"


def _section(**kw) -> DeviceSection:
    return DeviceSection(kind="adb", serial="FAKE0001", **kw)


def test_a_session_picks_the_big_cores_and_refuses_a_device_that_does_not_fit(fake, tmp_path):
    adb, dev = fake
    s = DeviceSession.open(_section(adb=str(adb.program)), 2, "aarch64", tmp_path / "locks")
    try:
        assert s.cores == (6, 7) and s.label == "adb:FAKE0001"
        assert [p.name for p in dev.sessions()] == [s.root.rsplit("/", 1)[1]]
    finally:
        s.close()
    assert dev.sessions() == []
    with pytest.raises(DeviceMismatch, match="ABI 'arm64-v8a'; target.arch = 'x86_64' needs 'x86_64'"):
        DeviceSession.open(_section(adb=str(adb.program)), 1, "x86_64", tmp_path / "locks")
    with pytest.raises(DeviceMismatch, match=r"device.cores \[9\]"):
        DeviceSession.open(_section(adb=str(adb.program), cores=[9]), 1, "aarch64", tmp_path / "locks")


def test_two_workers_timing_stages_on_one_device_take_turns(fake, tmp_path):
    """Two sessions (two workers) on one device: a timing stage in its turn keeps the other stage's prepare and
    timed runs out until all of its batches have run, though the device is free between its batches."""
    import threading

    adb, _dev = fake
    a, b = (DeviceSession.open(_section(adb=str(adb.program)), 1, "aarch64", tmp_path / "locks") for _ in "ab")
    order: list[str] = []
    b_asks = threading.Event()

    def second() -> None:
        b_asks.set()
        with b.turn(), b.prepare():
            order.append("b prepared")

    try:
        with a.turn():
            with a.prepare():
                order.append("a1")
            t = threading.Thread(target=second)
            t.start()
            assert b_asks.wait(30)
            time.sleep(0.3)  # without the turn, b's prepare would take the free device here
            with a.prepare():
                order.append("a2")
        t.join(30)
        assert not t.is_alive()
        assert order == ["a1", "a2", "b prepared"]
    finally:
        a.close()
        b.close()


@pytest.mark.slow  # waits out the fake device's busy spells (~10 s)
def test_hold_refuses_a_busy_device_and_reports_the_waits(fake, tmp_path):
    adb, dev = fake
    s = DeviceSession.open(_section(adb=str(adb.program), load_sample_s=0.2, poll_s=0.1, load_wait_s=0.3,
                                    cooldown_s=2.0), 1, "aarch64", tmp_path / "locks")
    try:
        with s.hold():
            first = s.conditions(s.cores)["device"]
        assert first.cooldown_wait_s < 0.1 and first.load_pct < 10  # nothing timed on the device before
        with s.hold():
            second = s.conditions(s.cores)["device"]
        assert second.cooldown_wait_s >= 1.0  # device.cooldown_s (2 s) after the end of the last timed runs
        dev.set(load_pct=70.0)
        with pytest.raises(DeviceBusy, match=r"CPU load 7\d\.\d % .* above device.max_load_pct = 10 %"):
            with s.hold():
                pass
    finally:
        s.close()


def test_the_device_section_is_checked_and_in_the_digest(tmp_path):
    def load(*args: str):
        return load_config(None, ["--target.arch", "aarch64", *args])

    base = load("--device.kind", "adb", "--device.serial", "R5CT1234")
    other = load("--device.kind", "adb", "--device.serial", "R5CT9999")
    assert base.target_info().timing_device == "adb:R5CT1234" and base.digest() != other.digest()
    assert base.digest() != load().digest()
    assert base.digest() == load("--device.kind", "adb", "--device.serial", "R5CT1234", "--device.adb", "/x/adb").digest()
    with pytest.raises(ConfigError, match="needs device.serial"):
        load("--device.kind", "adb")
    with pytest.raises(ConfigError, match="needs target.arch"):
        load_config(None, ["--device.kind", "adb", "--device.serial", "X"])
    with pytest.raises(ConfigError, match="timing.cores names this host's cores"):
        load("--device.kind", "adb", "--device.serial", "X", "--timing.cores", "[0]")
    with pytest.raises(ConfigError, match="device.cores"):
        load("--device.kind", "adb", "--device.serial", "X", "--device.cores", "[6,7]")
    with pytest.raises(ConfigError, match="absolute folder"):
        load("--device.kind", "adb", "--device.serial", "X", "--device.dir", "tmp/mkb")
    assert Path("configs/device.toml").is_file() and load_config("configs/device.toml").device.kind == "adb"
