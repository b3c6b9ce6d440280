"""The options of a job's stages, derived from the configuration once (:class:`JobSettings`,
:func:`job_settings`): nothing below this module and :mod:`kit.job.worker` / :mod:`kit.job.timing_worker` reads an
:class:`~kit.settings.config.EvalConfig`.  Also how commands that compile or run candidate code are confined
(:func:`policies`), the timing runs' cores (:func:`pin_timing`, :func:`device_timing`) and the baseline tables a
timing worker uses (:func:`baseline_book`).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field, replace
from pathlib import Path

from kit.baselines.book import Book
from kit.baselines.key import RunnerSettings
from kit.devices.session import DeviceSession
from kit.host import machine as hostinfo
from kit.host import sandbox, sandbox_check
from kit.host.target import Target
from kit.mnn import build as mbuild
from kit.mnn import toolchain
from kit.mnn.runner import RunSettings
from kit.settings.config import ConfigError, EvalConfig
from kit.settings.sections import stop_thresholds
from kit.stages.timing import TimingOptions
from kit.stages.verify import VerifyOptions


@dataclass(frozen=True)
class JobSettings:
    """The options of every stage of a job, from one configuration (see :func:`job_settings`)."""

    build: mbuild.BuildOptions
    verify: VerifyOptions
    timing: TimingOptions
    timing_enabled: bool
    mnn_version: str
    #: the commands that run or compile candidate code run in bubblewrap (False: rlimits only)
    sandboxed: bool = False
    #: what jobs are built for (a cross target's runs go through its emulator here)
    target: Target = field(default_factory=Target)


def job_settings(cfg: EvalConfig) -> JobSettings:
    """The stage options of ``cfg`` on this node.  Verification and timing run the runner with the same
    threads, precision and memory limit (``timing.threads``, ``timing.precision``, ``verify.memory_limit_mb``);
    timing runs are pinned to this node's timing cores (:func:`kit.host.machine.timing_cores`) and draw their
    inputs with ``verify.seed``.

    Every command that compiles or runs candidate code is confined (:func:`policies`).  The timing cores are
    not resolved here (a node that never times needs none): :func:`pin_timing`.

    A cross target (:mod:`kit.host.target`) builds with its toolchain and runs the runner behind its emulator, whose
    own thread the runner's thread check allows; each side's static runner is named by a label in the invocation
    digest.

    Raises:
        kit.host.sandbox.SandboxError: ``sandbox.mode = "bwrap"`` and bubblewrap does not work here.
        kit.host.target.TargetError: a cross target's emulator is missing."""
    build_policy, run_policy = policies(cfg)
    target = cfg.target_info()
    emulator = toolchain.emulator(target)
    run = RunSettings(threads=cfg.timing.threads, precision=cfg.timing.precision,
                      memory_limit_bytes=cfg.verify.memory_limit_mb << 20, policy=run_policy, emulator=emulator,
                      extra_threads=toolchain.EMULATOR_THREADS if emulator else 0,
                      runner_label=f"static {target.arch} mkb_runner, one per side" if target.static else "")
    v, t = cfg.verify, cfg.timing
    return JobSettings(
        build=mbuild.BuildOptions(engine=cfg.mnn.engine, cache_dir=cfg.mnn.cache_dir,
                                  cmake_args=tuple(cfg.mnn.cmake_args), jobs=cfg.build.jobs,
                                  timeout_s=cfg.build.timeout_s, ccache=cfg.build.ccache,
                                  stall_timeout_s=cfg.build.stall_timeout_s,
                                  candidate_timeout_s=cfg.build.candidate_timeout_s, policy=build_policy,
                                  target=target),
        verify=VerifyOptions(trials=v.trials, seed=v.seed, convert_timeout_s=v.convert_timeout_s,
                             run_timeout_s=v.run_timeout_s, run=run, extra_threads=tuple(v.extra_threads),
                             extra_trials=v.extra_trials, convert_policy=run_policy),
        timing=TimingOptions(warmup=t.warmup, iterations=t.iterations, rounds=t.rounds_max, confidence=t.confidence,
                             timeout_s=t.timeout_s, seed=v.seed, run=run, min_native_ms=t.min_native_ms,
                             implausible_speedup=t.implausible_speedup, checked_forwards=t.checked_forwards,
                             rounds_min=t.rounds_min, rounds_step=t.rounds_step, stop_width=t.stop_width,
                             thresholds=stop_thresholds(cfg.report.fast_p)),
        timing_enabled=t.enabled,
        mnn_version=cfg.mnn.version,
        sandboxed=run_policy.enabled,
        target=target,
    )


def baseline_book(cfg: EvalConfig, native_key: str) -> Book:
    """The baseline tables as a worker timing against native build ``native_key`` uses them (``[baselines]``:
    ``dir``, default ``<mnn.cache_dir>/baselines``; the runner settings that key a table from ``[timing]``)."""
    b, t = cfg.baselines, cfg.timing
    return Book(root=b.dir or cfg.mnn.cache_dir / "baselines", native_timing=b.native_timing, record=b.record,
                mnn_version=cfg.mnn.version, native_key=native_key,
                settings=RunnerSettings(t.threads, t.precision, t.warmup, t.iterations),
                source=str(Path(cfg.run.dir).resolve()))


def pin_timing(opts: TimingOptions, cfg: EvalConfig) -> TimingOptions:
    """``opts`` with its runs pinned to this node's timing cores (:func:`kit.host.machine.timing_cores`: ``timing.cores``,
    else the last ``timing.threads`` usable ones; verification runs wherever the scheduler puts them).

    Raises:
        kit.settings.config.ConfigError: ``timing.cores`` names cores this node does not have, or it has too few."""
    try:
        cores = hostinfo.timing_cores(cfg.timing.threads, cfg.timing.cores)
    except ValueError as exc:
        raise ConfigError(f"{exc} (on {socket.gethostname()}, where this worker times)") from None
    return replace(opts, run=replace(opts.run, cpus=cores))


def device_timing(opts: TimingOptions, device: DeviceSession) -> TimingOptions:
    """``opts`` for runs on the adb ``device``: pinned to its timing cores, run there natively (no emulator, no
    emulator's thread), launched by the device's session."""
    return replace(opts, run=replace(opts.run, cpus=device.cores, emulator=(), extra_threads=0, remote=device))


def policies(cfg: EvalConfig) -> tuple[sandbox.Policy, sandbox.Policy]:
    """How builds, and runs of the runner and the converter, are confined (``[sandbox]``): both in bubblewrap
    where :func:`kit.host.sandbox.resolve` says so; a compiler's address space ``build_memory_mb``, a run's
    ``verify.memory_limit_mb`` (set apart, as ``RunSettings.memory_limit_bytes``) and ``run_cpu_s``; both
    ``file_mb``, ``open_files`` and ``processes``; a runner's output directory at most ``out_mb``."""
    s = cfg.sandbox
    enabled = sandbox_check.resolve(s.mode) if cfg.container.mode == "host" else _container_sandbox(s.mode)
    common = dict(file_bytes=s.file_mb << 20, open_files=s.open_files, processes=s.processes)
    build = sandbox.Policy(enabled, sandbox.Limits(memory_bytes=s.build_memory_mb << 20, **common), s.tmp_mb << 20)
    run = sandbox.Policy(enabled, sandbox.Limits(cpu_s=s.run_cpu_s, **common), s.tmp_mb << 20, s.out_mb << 20)
    return build, run


def _container_sandbox(mode: str) -> bool:
    """In ``container.mode = "docker"`` the container is the sandbox, bubblewrap is not used inside
    (:mod:`kit.images.container` says why): ``sandbox.mode = "bwrap"`` is refused.

    Raises:
        kit.host.sandbox.SandboxError: ``mode`` is ``bwrap``."""
    if mode == "bwrap":
        raise sandbox.SandboxError("sandbox.mode = \"bwrap\" with container.mode = \"docker\": bubblewrap cannot "
                                   "make namespaces under Docker's default seccomp profile; the container is the "
                                   "sandbox (set sandbox.mode = \"auto\" or \"none\")")
    return False
