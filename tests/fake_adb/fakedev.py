"""Fake adb devices for the tests: :func:`install` puts the fake ``adb`` in a folder (to go first on PATH or to
name as ``device.adb``), :func:`make_device` makes a device in ``$ADB_FAKE_HOME``, :class:`FakeDevice` changes
its state between or during runs (see the ``adb`` script's docstring for what each setting does)."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: a phone's three clusters: 3 little cores at 2.0 GHz, 4 at 2.8 GHz, 1 prime core at 3.2 GHz (kHz)
PHONE_CORES_KHZ = (2016000, 2016000, 2016000, 2803200, 2803200, 2803200, 2803200, 3187200)
PROPS = {"ro.product.model": "Fake Phone 8", "ro.soc.model": "FAKE8G2", "ro.board.platform": "fakeplat",
         "ro.build.version.release": "14", "ro.build.version.sdk": "34", "ro.product.cpu.abi": "arm64-v8a",
         "ro.boot.qemu": "1"}
QEMU = ["/usr/bin/qemu-aarch64-static", "-L", "/usr/aarch64-linux-gnu"]


def _with_python(src: Path, dst: Path) -> None:
    """``src`` written to ``dst`` with this interpreter as its interpreter (no PATH lookup per call)."""
    body = src.read_text().split("\n", 1)[1]
    dst.write_text(f"#!{sys.executable}\n{body}")
    dst.chmod(0o755)


def install(bin_dir: Path) -> Path:
    """The fake ``adb`` in ``bin_dir``; returns its path."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    _with_python(HERE / "adb", bin_dir / "adb")
    return bin_dir / "adb"


@dataclass
class FakeDevice:
    home: Path
    serial: str

    @property
    def dir(self) -> Path:
        return self.home / self.serial

    @property
    def root(self) -> Path:
        return self.dir / "root"

    def control(self) -> dict[str, Any]:
        return json.loads((self.dir / "control.json").read_text())

    def set(self, **changes: Any) -> None:
        """Change ``control.json`` (``state``, ``load_pct``, ``vanish_at_run``, ...)."""
        ctl = self.control() | changes
        (self.dir / "control.json").write_text(json.dumps(ctl))

    def heat(self, hot_c: float, cool_c_per_s: float) -> None:
        """Make every CPU zone ``hot_c`` now, cooling by ``cool_c_per_s`` per second."""
        zones = [z | ({"hot_c": hot_c, "cool_c_per_s": cool_c_per_s, "hot_since": time.time()}
                      if "cpu" in z["type"] else {}) for z in self.control()["zones"]]
        self.set(zones=zones)

    @property
    def runs(self) -> int:
        """aarch64 programs the device has started."""
        p = self.dir / "runs"
        return int(p.read_text() or 0) if p.is_file() else 0

    def masks(self) -> list[str]:
        """The ``taskset`` masks of the programs started, in order."""
        p = self.dir / "taskset.log"
        return [line.split()[0] for line in p.read_text().splitlines()] if p.is_file() else []

    def sessions(self) -> list[Path]:
        """The kit's session folders left on the device."""
        d = self.root / "data" / "local" / "tmp" / "mkb"
        return sorted(d.iterdir()) if d.is_dir() else []


def make_device(home: Path, serial: str = "FAKE0001", cores_khz: tuple[int, ...] = PHONE_CORES_KHZ,
                load_pct: float = 2.0, state: str = "device", props: dict[str, str] | None = None) -> FakeDevice:
    """A fake device ``serial`` in ``home`` (its cores at ``cores_khz``, its CPUs ``load_pct`` busy)."""
    dev = FakeDevice(home, serial)
    if dev.dir.exists():
        raise FileExistsError(dev.dir)
    (dev.dir / "bin").mkdir(parents=True)
    for shim in ("taskset", "getprop", "dumpsys"):
        _with_python(HERE / "shims" / shim, dev.dir / "bin" / shim)
    (dev.root / "data" / "local" / "tmp").mkdir(parents=True)
    (dev.root / "sdcard").mkdir()
    for i, khz in enumerate(cores_khz):
        freq = dev.root / "sys" / "devices" / "system" / "cpu" / f"cpu{i}" / "cpufreq"
        freq.mkdir(parents=True)
        (freq / "cpuinfo_max_freq").write_text(f"{khz}\n")
        (freq / "scaling_cur_freq").write_text(f"{khz}\n")
        (freq / "scaling_governor").write_text("schedutil\n")
        if i:
            (freq.parent / "online").write_text("1\n")
    (dev.dir / "props.json").write_text(json.dumps(PROPS | (props or {})))
    zones = [{"type": "cpu-0-0-usr", "temp_c": 36.0}, {"type": "cpu-1-0-usr", "temp_c": 37.5},
             {"type": "battery", "temp_c": 29.0}]
    (dev.dir / "control.json").write_text(json.dumps({
        "state": state, "model": "Fake_Phone_8", "ncpu": len(cores_khz), "load_pct": load_pct,
        "loadavg": "0.42 0.50 0.61 1/812 4242", "zones": zones, "vanish_at_run": None, "qemu": QEMU,
        "battery": {"level": 87, "usb": True, "temp_c": 29.0}}))
    return dev
