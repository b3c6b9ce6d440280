"""What a baseline table is keyed by: the hardware that timed, the MNN version, and the build flags and runner
settings of the native side; and the content digest of a task (an entry's key inside a table).

* **hardware fingerprint** (:func:`host_hardware`, :func:`device_hardware`): on a host or a Ray node the
  :data:`kit.host.machine.HARDWARE_KEYS` of :func:`kit.host.machine.fingerprint` (CPU model, architecture, logical
  CPUs); on an adb device its model, SoC, ABI, the cores the runners were pinned to and their maximum
  frequencies.  ``fingerprint_id``: sha256 (16 hex) of it.
* **flags digest**: sha256 (16 hex) of the native build's key (:func:`kit.mnn.native.native_key`: tree digest,
  compiler, CMake arguments, runner sources, target) and of the runner settings that change a native op time
  (threads, precision, warm-up passes, timed passes per run).
* **task digest** (:func:`task_sha256`): sha256 over the task folder's files that define what native runs
  (``task.toml``: shapes, op types; ``model.onnx``; ``model.py``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.host import machine as hostinfo
from kit.results.records import DeviceState
from kit.suite.tasks import Task

#: the task files whose content an entry is keyed by, in digest order
TASK_FILES: tuple[str, ...] = ("task.toml", "model.onnx", "model.py")


def _sha16(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def host_hardware() -> dict[str, Any]:
    """This node's hardware fingerprint: ``{"device": "host", "cpu_model": str, "arch": str, "cpus": int}``
    (:data:`kit.host.machine.HARDWARE_KEYS`)."""
    fp = hostinfo.fingerprint()
    return {"device": "host", **{k: fp[k] for k in hostinfo.HARDWARE_KEYS}}


def device_hardware(state: DeviceState) -> dict[str, Any]:
    """An adb device's hardware fingerprint from its state: model, SoC, ABI, the cores the runners were pinned
    to and their ``cpuinfo_max_freq`` (MHz)."""
    return {"device": "adb", "model": state.model, "soc": state.soc, "abi": state.abi, "cores": list(state.cores),
            "cores_max_mhz": list(state.cores_max_mhz)}


def describe_hardware(hardware: dict[str, Any]) -> str:
    """A fingerprint in words: ``x86_64, Intel(R) Xeon(R) CPU @ 2.20GHz, 2 CPUs`` or ``adb SM8550 (Pixel 8),
    cores [4, 5]``."""
    if hardware.get("device") == "adb":
        return (f"adb {hardware.get('soc') or '?'} ({hardware.get('model') or '?'}), "
                f"cores {hardware.get('cores')}")
    return f"{hardware.get('arch', '?')}, {hardware.get('cpu_model', '?')}, {hardware.get('cpus', '?')} CPUs"


@dataclass(frozen=True)
class RunnerSettings:
    """The runner settings that change a native op time: ``threads``, ``precision`` (MNN's BackendConfig),
    ``warmup`` untimed and ``iterations`` timed passes per run."""

    threads: int
    precision: str
    warmup: int
    iterations: int


@dataclass(frozen=True)
class BaselineKey:
    """The key of one baseline table (module docstring): ``hardware`` (the fingerprint), ``mnn_version``,
    ``native_key`` (the native build's key) and ``settings``."""

    hardware: dict[str, Any]
    mnn_version: str
    native_key: str
    settings: RunnerSettings
    #: set from the rest (never given)
    fingerprint_id: str = field(init=False)
    flags_digest: str = field(init=False)
    key: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fingerprint_id", _sha16(self.hardware))
        flags = {"native_key": self.native_key, **self.settings.__dict__}
        object.__setattr__(self, "flags_digest", _sha16(flags))
        object.__setattr__(self, "key", _sha16([self.fingerprint_id, self.mnn_version, self.flags_digest]))

    def describe(self) -> dict[str, Any]:
        """The key as JSON types: ``key``, ``fingerprint_id``, ``fingerprint`` (the hardware), ``hardware`` (in
        words), ``mnn_version``, ``flags_digest``, ``native_key``, and the settings."""
        return {"key": self.key, "fingerprint_id": self.fingerprint_id, "fingerprint": self.hardware,
                "hardware": describe_hardware(self.hardware), "mnn_version": self.mnn_version,
                "flags_digest": self.flags_digest, "native_key": self.native_key, **self.settings.__dict__}


def task_sha256(task: Task) -> str:
    """sha256 (hex) over the :data:`TASK_FILES` of ``task``'s folder (name and content of each present one).

    Raises:
        OSError: a file cannot be read."""
    assert task.path is not None
    h = hashlib.sha256()
    for name in TASK_FILES:
        path = Path(task.path) / name
        if path.is_file():
            h.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()
