"""The ``[device]`` section: an Android phone over adb that times the jobs (:mod:`kit.devices`).

Build and verification stay on this host (a cross build for ``target.arch = "aarch64"``, verified under qemu);
only the timing runs go to the device, chosen by its serial (``adb devices``)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from kit.settings.base import Section, fields_error


class DeviceSection(Section):
    """Where timing runs when it is not this node: ``kind = "adb"`` times on the Android device ``serial``."""

    #: ``none``: this node times (natively, or under qemu for a cross target); ``adb``: the device ``serial``
    kind: Literal["none", "adb"] = "none"
    #: the device's serial as ``adb devices`` lists it (a USB serial, or ``HOST:PORT`` over the network)
    serial: str = ""
    #: the adb program: a name looked up on PATH or a path
    adb: str = "adb"
    #: the folder on the device under which each session makes its own (removed when the session ends)
    dir: str = "/data/local/tmp/mkb"
    #: the cores the runners are pinned to (``timing.threads`` of them); empty: the ``timing.threads`` cores of
    #: the highest ``cpuinfo_max_freq`` (the big cores)
    cores: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list)
    #: refuse to time while the device's CPUs are busier than this, percent over all cores (the paper keeps
    #: its phone under 10 %); waited for up to ``load_wait_s`` first
    max_load_pct: float = Field(default=10.0, gt=0, le=100)
    #: seconds between the two /proc/stat reads that measure the load
    load_sample_s: float = Field(default=1.0, gt=0)
    #: seconds to wait for the load to fall below ``max_load_pct`` before the job is refused (``device_busy``)
    load_wait_s: float = Field(default=60.0, ge=0)
    #: seconds between the end of one candidate's timed runs and the start of the next one's
    cooldown_s: float = Field(default=0.0, ge=0)
    #: wait before the timed runs until the hottest CPU thermal zone is at most this, °C (None: no limit)
    max_temp_c: float | None = Field(default=None, gt=0)
    #: seconds to wait for ``max_temp_c`` before the job is refused (``device_busy``)
    cooldown_timeout_s: float = Field(default=600.0, ge=0)
    #: seconds between two reads of the temperature or the load while waiting
    poll_s: float = Field(default=5.0, gt=0)
    #: seconds for one adb command other than a timing run (push, pull, shell, get-state)
    command_timeout_s: float = Field(default=120.0, gt=0)

    @field_validator("dir")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not re.fullmatch(r"(/[A-Za-z0-9._-]+)+", v):
            raise ValueError(f"{v!r}: give an absolute folder on the device of plain names "
                             "(letters, digits, '.', '_', '-'), e.g. /data/local/tmp/mkb")
        return v

    @model_validator(mode="after")
    def _serial_for_adb(self) -> DeviceSection:
        if self.kind == "adb" and not re.fullmatch(r"[A-Za-z0-9._:\-]+", self.serial):
            raise fields_error(("serial", "kind"), f"device.kind = \"adb\" needs device.serial, the serial "
                               f"`adb devices` lists (letters, digits, '.', '_', ':', '-'); got {self.serial!r}")
        return self

    def digest_payload(self) -> dict[str, object] | None:
        """What of this section changes a job's timing (None without a device): the device and how it is
        held, not how it is reached (``adb``, ``dir``, the timeouts)."""
        if self.kind == "none":
            return None
        return self.model_dump(mode="json", include={"kind", "serial", "cores", "max_load_pct", "cooldown_s",
                                                     "max_temp_c"})
