"""Timing off this host: an Android device over adb (docs/devices.md).

:mod:`~kit.devices.adb` is the adb client (every call through :mod:`kit.host.proc`, with a timeout);
:mod:`~kit.devices.state` reads and parses the device's state (model, SoC, cores, temperature, battery,
load); :mod:`~kit.devices.remote` runs one prepared runner invocation on the device (its files pushed, its
outputs pulled); :mod:`~kit.devices.session` is what a worker holds for its life (the device's folder, the
pushed baseline, the device lock, the load limit and the cool-down).  Their errors are
:class:`~kit.devices.errors.DeviceError`; :func:`kit.job.pipeline._guarded` makes a job's ``timing_failed`` of one.
This package imports nothing of the kit above :mod:`kit.mnn.runner`.
"""
