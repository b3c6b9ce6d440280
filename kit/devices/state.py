"""The state of an Android device, read in one ``adb shell`` (:data:`STATE_SCRIPT`) and parsed here.

Sources: ``getprop`` (model ``ro.product.model``, SoC ``ro.soc.model`` (Android 12+) else
``ro.board.platform``, ``ro.build.version.release``/``.sdk``, ABI ``ro.product.cpu.abi``, an emulator's
``ro.kernel.qemu``/``ro.boot.qemu``), ``uname -r``, ``/sys/devices/system/cpu/cpu<N>/cpufreq/``
(``cpuinfo_max_freq``, ``scaling_cur_freq`` in kHz, ``scaling_governor``) and ``cpu<N>/online``,
``/sys/class/thermal/thermal_zone*/`` (``type``, ``temp`` in m°C on most kernels, °C on some), ``/proc/loadavg``,
the first line of ``/proc/stat`` (jiffies per state, summed over the cores) and ``dumpsys battery``.  Every
parser takes text and returns what it could read (None or empty where the device hides it: many phones
restrict thermal zones or cpufreq to root).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kit.results.records import DeviceState

#: the properties read
PROPS = ("ro.product.model", "ro.soc.model", "ro.board.platform", "ro.build.version.release",
         "ro.build.version.sdk", "ro.product.cpu.abi", "ro.kernel.qemu", "ro.boot.qemu")
#: the ABI name (``ro.product.cpu.abi``) of each target architecture
ABIS = {"aarch64": "arm64-v8a", "x86_64": "x86_64"}

#: POSIX sh (Android's mksh, or toybox) that prints the state in ``@section`` blocks
STATE_SCRIPT = "; ".join([
    "echo @props",
    f"for p in {' '.join(PROPS)}; do echo \"$p=$(getprop $p)\"; done",
    "echo @kernel", "uname -r",
    "echo @cpus",
    "for c in /sys/devices/system/cpu/cpu[0-9]*; do f=$c/cpufreq; "
    "echo \"${c##*/cpu} $(cat $f/cpuinfo_max_freq 2>/dev/null || echo -) $(cat $f/scaling_cur_freq 2>/dev/null || echo -)"
    " $(cat $f/scaling_governor 2>/dev/null || echo -) $(cat $c/online 2>/dev/null || echo 1)\"; done",
    "echo @thermal",
    "for z in /sys/class/thermal/thermal_zone*; do echo \"$(cat $z/temp 2>/dev/null || echo -) $(cat $z/type 2>/dev/null)\"; done",
    "echo @loadavg", "cat /proc/loadavg",
    "echo @stat", "head -n 1 /proc/stat",
    "echo @battery", "dumpsys battery 2>/dev/null",
    "true",
])
#: the script of a second /proc/stat read (the load over the time between the two)
STAT_SCRIPT = "head -n 1 /proc/stat"


@dataclass(frozen=True)
class Cpu:
    """One core: ``index``, ``max_khz`` (``cpuinfo_max_freq``), ``cur_khz``, ``governor`` ("" unreadable),
    ``online``."""

    index: int
    max_khz: int | None
    cur_khz: int | None
    governor: str
    online: bool


@dataclass(frozen=True)
class Raw:
    """What :data:`STATE_SCRIPT` printed, parsed: properties, kernel, cores, thermal zones (type, °C),
    the 1-minute load average, the ``/proc/stat`` cpu line's jiffies, and ``dumpsys battery``'s fields."""

    props: dict[str, str] = field(default_factory=dict)
    kernel: str = ""
    cpus: tuple[Cpu, ...] = ()
    zones: tuple[tuple[str, float], ...] = ()
    load_1m: float | None = None
    stat: tuple[int, ...] | None = None
    battery: dict[str, str] = field(default_factory=dict)

    @property
    def emulated(self) -> bool:
        """The device says it is an emulator (``ro.kernel.qemu`` or ``ro.boot.qemu`` is 1)."""
        return "1" in (self.props.get("ro.kernel.qemu", ""), self.props.get("ro.boot.qemu", ""))


def _sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("@") and line[1:].strip().isalpha():
            current = out.setdefault(line[1:].strip(), [])
        elif current is not None and line.strip():
            current.append(line.rstrip())
    return out


def _int(text: str) -> int | None:
    return int(text) if text.strip().lstrip("-").isdigit() else None


def parse_stat(line: str) -> tuple[int, ...] | None:
    """The jiffies of ``/proc/stat``'s aggregate ``cpu`` line (user, nice, system, idle, iowait, irq, ...)."""
    parts = line.split()
    if len(parts) < 5 or parts[0] != "cpu" or not all(p.isdigit() for p in parts[1:]):
        return None
    return tuple(int(p) for p in parts[1:])


def parse_cpu(line: str) -> Cpu | None:
    """One line of the ``@cpus`` block: ``INDEX MAX_KHZ CUR_KHZ GOVERNOR ONLINE`` (``-`` unreadable)."""
    parts = line.split()
    if len(parts) != 5 or not parts[0].isdigit():
        return None
    return Cpu(int(parts[0]), _int(parts[1]), _int(parts[2]), "" if parts[3] == "-" else parts[3], parts[4] != "0")


def temp_celsius(value: str) -> float | None:
    """A thermal zone's ``temp`` in °C: m°C when its magnitude is 1000 or more, else °C; None for an unreadable
    or implausible value (a disabled sensor reads e.g. -273000)."""
    raw = _int(value)
    if raw is None:
        return None
    c = raw / 1000.0 if abs(raw) >= 1000 else float(raw)
    return c if -40.0 <= c <= 200.0 else None


def parse_state(text: str) -> Raw:
    """Parse the output of :data:`STATE_SCRIPT`."""
    sec = _sections(text)
    props = {k: v.strip() for k, _, v in (line.partition("=") for line in sec.get("props", [])) if k in PROPS}
    cpus = tuple(c for line in sec.get("cpus", []) if (c := parse_cpu(line)) is not None)
    zones = []
    for line in sec.get("thermal", []):
        value, _, kind = line.strip().partition(" ")
        if (c := temp_celsius(value)) is not None:
            zones.append((kind.strip() or "?", c))
    load = sec.get("loadavg", [""])[0].split()
    stat = parse_stat(sec.get("stat", [""])[0])
    battery = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in sec.get("battery", [])) if v}
    return Raw(props, (sec.get("kernel") or [""])[0].strip(), cpus, tuple(zones),
               float(load[0]) if load and re.fullmatch(r"\d+(\.\d+)?", load[0]) else None, stat, battery)


def busy_pct(before: tuple[int, ...] | None, after: tuple[int, ...] | None) -> float | None:
    """Percent of the jiffies between two ``/proc/stat`` reads that were not idle or iowait (fields 4 and 5),
    over all cores; None without two reads or without time between them."""
    if before is None or after is None or len(before) != len(after):
        return None
    delta = [b - a for a, b in zip(before, after)]
    total = sum(delta[:8])  # guest times are counted in user already
    if total <= 0:
        return None
    idle = delta[3] + (delta[4] if len(delta) > 4 else 0)
    return max(0.0, min(100.0, 100.0 * (total - idle) / total))


def big_cores(cpus: tuple[Cpu, ...], n: int) -> tuple[int, ...]:
    """The ``n`` online cores of the highest maximum frequency (ties: the higher index, where big clusters sit
    on ARM SoCs), sorted.

    Raises:
        ValueError: fewer than ``n`` online cores, or none with a readable frequency."""
    online = [c for c in cpus if c.online]
    if len(online) < n:
        raise ValueError(f"the device has {len(online)} online core(s), timing.threads = {n}")
    if not any(c.max_khz for c in online):
        raise ValueError("no core of the device shows cpuinfo_max_freq: give device.cores")
    ranked = sorted(online, key=lambda c: (c.max_khz or 0, c.index), reverse=True)
    return tuple(sorted(c.index for c in ranked[:n]))


def hottest(zones: tuple[tuple[str, float], ...]) -> tuple[float | None, str]:
    """The hottest zone whose type names the CPU (every zone where none does): (°C, type), (None, "")."""
    cpu = [z for z in zones if "cpu" in z[0].lower()] or list(zones)
    if not cpu:
        return None, ""
    kind, c = max(cpu, key=lambda z: z[1])
    return c, kind


def battery(fields: dict[str, str]) -> tuple[int | None, bool | None, float | None]:
    """``dumpsys battery``'s level (percent of ``scale``), charging (a source ``powered: true`` or ``status: 2``,
    BatteryManager.BATTERY_STATUS_CHARGING) and temperature (tenths of °C)."""
    level, scale = _int(fields.get("level", "")), _int(fields.get("scale", "")) or 100
    pct = round(100 * level / scale) if level is not None else None
    powered = [v for k, v in fields.items() if k.endswith(" powered")]
    charging = (any(v == "true" for v in powered) or fields.get("status") == "2") if powered or "status" in fields else None
    temp = _int(fields.get("temperature", ""))
    return pct, charging, temp / 10.0 if temp is not None else None


def device_state(serial: str, raw: Raw, cores: tuple[int, ...], load_pct: float | None, load_sample_s: float,
                 cooldown_wait_s: float = 0.0, load_wait_s: float = 0.0) -> DeviceState:
    """The record's :class:`~kit.results.records.DeviceState` of ``raw`` for the timing ``cores``."""
    used = [c for c in raw.cpus if c.index in cores]
    cur = [c.cur_khz for c in used if c.cur_khz]
    temp, zone = hottest(raw.zones)
    pct, charging, bat_temp = battery(raw.battery)
    p = raw.props
    return DeviceState(
        serial=serial, model=p.get("ro.product.model", ""), soc=p.get("ro.soc.model") or p.get("ro.board.platform", ""),
        android_release=p.get("ro.build.version.release", ""), android_sdk=_int(p.get("ro.build.version.sdk", "")),
        kernel=raw.kernel, abi=p.get("ro.product.cpu.abi", ""), cores=list(cores),
        cores_max_mhz=[c.max_khz / 1000.0 for c in used if c.max_khz],
        governor=",".join(sorted({c.governor for c in used if c.governor})),
        freq_mhz=sum(cur) / len(cur) / 1000.0 if cur else None, temp_c=temp, temp_zone=zone, battery_pct=pct,
        charging=charging, battery_temp_c=bat_temp, load_pct=load_pct, load_sample_s=load_sample_s,
        load_1m=raw.load_1m, cooldown_wait_s=cooldown_wait_s, load_wait_s=load_wait_s, emulated=raw.emulated)
