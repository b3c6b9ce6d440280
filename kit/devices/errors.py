"""What goes wrong with a timing device: :class:`DeviceError` and its kinds.

A job's timing that meets one becomes ``timing_failed`` with the error's ``kind`` (:func:`kit.job.pipeline._guarded`;
``device_lost`` and ``device_busy`` are retried by a resumed run, :mod:`kit.results.rules`); met while a worker is set
up (adb missing, no such device, unauthorized) it stops the run with its message.
"""

from __future__ import annotations

from kit.results.records import ErrorKind


class DeviceError(Exception):
    """The timing device failed the kit; ``kind`` is the record's error kind (``device_lost`` unless said)."""

    kind: ErrorKind = ErrorKind.DEVICE_LOST


class AdbMissing(DeviceError):
    """The adb program is not there (``device.adb``)."""


class DeviceLost(DeviceError):
    """The device is not (or no longer) reachable: not listed, offline, unauthorized, or adb timed out."""


class DeviceBusy(DeviceError):
    """The device stayed above ``device.max_load_pct`` or ``device.max_temp_c`` longer than allowed."""

    kind = ErrorKind.DEVICE_BUSY


class DeviceMismatch(DeviceError):
    """The device cannot run the target's binaries (its ABI) or lacks the configured cores."""


class BaselineTampered(DeviceError):
    """A file of the native baseline or the inputs on the device changed during a candidate's timing: the
    candidate's code runs there as the same user (no sandbox on the phone), so it is the candidate's doing."""

    kind = ErrorKind.FORBIDDEN
