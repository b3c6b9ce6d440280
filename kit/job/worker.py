"""What a worker owns and how it is set up.

A build worker (:class:`Worker`) owns, for its life, a workspace (a private copy of the pristine tree and its
build directory, locked), the native baseline built from the same tree, and its node's gate (builds shared,
timing exclusive).  A timing worker (when timing runs on other nodes than builds) is :class:`kit.job.timing_worker.TimingWorker`.
The options the stages and ``kit.mnn`` receive are derived from the configuration once, in
:mod:`kit.job.options`: nothing below these modules reads an :class:`~kit.settings.config.EvalConfig`.
"""

from __future__ import annotations

import fcntl
import logging
import os
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from kit.baselines.book import Book
from kit.baselines.key import device_hardware
from kit.devices.session import DeviceSession
from kit.host import fstree, proc
from kit.host.nodelock import NodeLock
from kit.host.target import Target
from kit.images import container as icontainer
from kit.job.options import JobSettings, baseline_book, device_timing, job_settings, pin_timing
from kit.mnn import build as mbuild
from kit.mnn import toolchain
from kit.mnn.native import (
    Native,
    NativeBuildError,
    check_build_tools,
    ensure_native,
    native_label,
    native_meta,
    ready_workspace,
    workspace_lib_dir,
)
from kit.mnn.source import Pristine, ensure_pristine
from kit.mnn.workspace import Workspace, open_workspace
from kit.settings.config import EvalConfig, MnnSection
from kit.stages.native import NativeModels, NativeSymbols
from kit.stages.timing import TimingOptions
from kit.stages.verify import Side
from kit.suite.tasks import Task, sha256_file

log = logging.getLogger("kit")


class BaselineChanged(Exception):
    """A file of the native baseline differs from when it was first used (a candidate wrote into it, or the
    cache was changed under a running worker): a harness error, and no timing against it."""


@dataclass
class Seal:
    """sha256 of files as first seen; :meth:`check` refuses any that changed since (the native baseline's
    libraries, runner and models, checked before each timing phase: ~20 ms for MNN's 15 MB)."""

    digests: dict[Path, str] = field(default_factory=dict)

    def check(self, paths: list[Path]) -> None:
        """Seal the paths not seen yet; refuse a path whose content changed since it was sealed.

        Raises:
            BaselineChanged: names the file."""
        for path in paths:
            sha = sha256_file(path)
            if self.digests.setdefault(path, sha) != sha:
                raise BaselineChanged(f"{path} changed since this worker first used it (sha256 "
                                      f"{self.digests[path][:16]} -> {sha[:16]}): not timing against it")


def scratch_root(cache_dir: Path) -> Path:
    """This process's scratch directory under ``cache_dir/scratch`` (one per process: a job's scratch is made
    in it and removed after the job), after removing those of kit processes that are gone (a killed worker
    cannot remove its last job's)."""
    base = cache_dir / "scratch"
    base.mkdir(parents=True, exist_ok=True)
    for d in base.iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid() and not Path(f"/proc/{d.name}").exists():
            try:
                fstree.remove(d)  # a candidate's tree of any depth (kit.host.fstree)
            except OSError as exc:  # left for a later sweep: this process works in a directory of its own
                log.warning("could not remove the scratch %s of a kit process that is gone: %s", d, exc)
    mine = base / str(os.getpid())
    mine.mkdir(exist_ok=True)
    return mine



@dataclass(frozen=True)
class HostBuild:
    """A cross target's build-host half: a workspace of the host (a converter task's candidate is built there,
    natively) and the host's native baseline (its converter converts every other model)."""

    workspace: Workspace
    native: Native


@dataclass
class Worker:
    """What a build worker owns for its life: its workspace, the native baseline, its node's gate; for a cross
    target also the host's half (:class:`HostBuild`).  It times its own jobs too, as a
    :class:`kit.job.place.TimingPlace`."""

    cfg: EvalConfig
    workspace: Workspace
    native: Native
    name: str = "w0"
    mnn_version: str = ""
    #: how the native build was compiled (its meta.json's ``build_flags``)
    build_flags: str = ""
    #: node-local lock: builds/verification shared, timing exclusive (None: no exclusivity)
    gate: NodeLock | None = None
    #: the stage the current job is in ("build", "verify", "time"; "" between jobs), for progress displays
    stage: str = ""
    #: the native libraries' symbols, read once (:mod:`kit.stages.native`)
    native_symbols: NativeSymbols = field(default_factory=NativeSymbols)
    seal: Seal = field(default_factory=Seal)
    host: HostBuild | None = None
    #: the container its commands run in (``container.mode = "docker"``; None: on the host)
    container: icontainer.WorkerContainer | None = None
    #: the adb device that times this worker's jobs (None: this node times)
    device: DeviceSession | None = None

    def release(self) -> None:
        """Remove the worker's container, release the workspace locks (the host's half's too) and the device's
        folder."""
        if self.container is not None:
            self.container.remove()
            self.container = None
        self.workspace.release()
        if self.host is not None:
            self.host.workspace.release()
        if self.device is not None:
            self.device.close()

    @property
    def image_id(self) -> str:
        """The image id its commands run in ("" on the host)."""
        return self.container.image.id if self.container is not None else ""

    @cached_property
    def scratch(self) -> Path:
        """Where this worker's jobs get their scratch directories (:func:`scratch_root`)."""
        return scratch_root(self.cfg.mnn.cache_dir)

    def check_native(self, model: Path | None) -> None:
        """Refuse a native baseline (runner, libraries, the task's native model) that changed since this
        worker first used it.

        Raises:
            BaselineChanged: names the file."""
        files = [self.native.runner, *sorted(p for p in self.native.lib_dir.iterdir() if p.is_file())]
        self.seal.check(files + ([model] if model is not None else []))

    @cached_property
    def settings(self) -> JobSettings:
        return job_settings(self.cfg)

    @cached_property
    def timing(self) -> TimingOptions:
        """The timing options, pinned to this node's timing cores (:func:`kit.job.options.pin_timing`; resolved
        when the worker first times), or to the adb device's (:func:`kit.job.options.device_timing`)."""
        if self.device is not None:
            return device_timing(self.settings.timing, self.device)
        return pin_timing(self.settings.timing, self.cfg)

    @property
    def native_key(self) -> str:
        return self.native.key

    @property
    def runner(self) -> Path:
        """The native build's runner: it runs every side without a runner of its own."""
        return self.native.runner

    @cached_property
    def baselines(self) -> Book:
        """The baseline tables of the native build this worker times against (:func:`baseline_book`); with an adb
        device, keyed by the device's hardware as its session read it (so provenance names the device's table)."""
        book = baseline_book(self.cfg, self.native.key)
        if self.device is not None and (opened := self.device.opened) is not None:
            book = replace(book, hardware=lambda: device_hardware(opened))
        return book

    @property
    def native_side(self) -> Side:
        """The native baseline as a side: natively its converter and libraries; for a cross target the host's
        converter and the target's static runner."""
        if self.host is None:
            return Side(self.native.converter, self.native.lib_dir)
        return Side(self.host.native.converter, None, runner=self.native.runner,
                    converter_lib_dir=self.host.native.lib_dir)

    def on_host(self, task: Task) -> bool:
        """A candidate of ``task`` is built on the host's half: a cross target's converter task (the converter
        runs on the build host; the target's runtime stays native)."""
        return self.host is not None and task.mechanism == "composite"

    def build_place(self, task: Task) -> tuple[Workspace, mbuild.BuildOptions, Native]:
        """Where a candidate of ``task`` is built: the workspace, its build options, and the native baseline
        built the same way (whose libraries' symbols the candidate's are compared with)."""
        if self.on_host(task):
            assert self.host is not None
            return self.host.workspace, self.settings.build.host(), self.host.native
        return self.workspace, self.settings.build, self.native

    def candidate_side(self, task: Task, runner: Path | None) -> Side:
        """The side of a candidate of ``task`` built in :meth:`build_place` (``runner``: its own static runner,
        None for a shared build or a converter task)."""
        ws, _, _ = self.build_place(task)
        if self.host is None:
            return Side(ws.build / "MNNConvert", workspace_lib_dir(ws))
        if self.on_host(task):
            return Side(ws.build / "MNNConvert", None, runner=self.native.runner,
                        converter_lib_dir=workspace_lib_dir(ws))
        return replace(self.native_side, runner=runner)

    @cached_property
    def native_models(self) -> NativeModels:
        """The tasks converted by the native converter (:attr:`native_side`), kept in the native build's model
        folder (:mod:`kit.stages.native`)."""
        return NativeModels(self.native.models, self.native_side, self.settings.verify, self.name)


def workspace_base(mnn: MnnSection, pristine: Pristine, target: Target | None = None) -> Path:
    """The folder of the workspaces made from ``pristine`` (one per engine and tree digest, and per target
    architecture for a cross target) in the cache."""
    arch = f"{target.arch}-" if target is not None and target.cross else ""
    return mnn.cache_dir / "workspaces" / f"{mnn.engine}-{arch}{pristine.digest[:16]}"


def _locked(base: Path, pristine: Pristine, index: int | None) -> Workspace:
    """A locked workspace under ``base`` (:func:`kit.mnn.workspace.open_workspace`), after killing what a dead
    previous owner left running in it (e.g. its compilers)."""
    ws = open_workspace(base, pristine, index)
    killed = proc.track_children(ws.root / "procs")
    if killed:
        log.warning("workspace %s: killed %d process group(s) left by a dead worker", ws.root, len(killed))
    return ws


def _prepared(cfg: EvalConfig, ws: Workspace, opts: mbuild.BuildOptions, pristine: Pristine, gate: NodeLock) -> Native:
    """The native baseline of ``opts`` (built in ``ws`` unless cached) and ``ws`` configured and built whole.

    Raises:
        NativeBuildError: a program the builds need is missing (said before waiting for any lock), or the
            pristine tree fails to configure or build."""
    check_build_tools(opts, native_label(opts))
    # the native lock first: never wait for another lock while holding the gate (see kit.host.nodelock); its folder made
    # here, not left to the steps before (a fresh cache has none)
    cfg.mnn.cache_dir.mkdir(parents=True, exist_ok=True)
    with open(cfg.mnn.cache_dir / "native.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with gate.shared():
            native = ensure_native(opts, pristine, ws)
            try:
                mbuild.configure(ws, opts)
            except mbuild.ConfigureError as exc:  # the pristine tree's: the run's setup failed, not a job
                raise NativeBuildError(f"workspace {ws.root.name}: {exc.cause}", exc.log) from exc
    # a fresh workspace's first build is the whole tree: done here, so that a candidate's build (and its
    # build.candidate_timeout_s) covers only what its files and the previous job's change
    ready_workspace(ws, opts, f"workspace {ws.root.name} build", hold=gate.shared)
    ws.checked_at_setup = True
    return native


def setup_worker(cfg: EvalConfig, index: int | None = None, name: str | None = None) -> Worker:
    """Pristine tree, a locked workspace (``w<index>``; the first free one when None) and the native baseline
    (built on first use, then cached).  A cross target's worker also locks the first free host workspace of
    the same tree and takes the host's native baseline (:class:`HostBuild`; shared with host-target runs).

    Raises:
        kit.mnn.source.SourceError, kit.mnn.native.NativeBuildError: the tree cannot be had or built.
        kit.host.target.TargetError: a cross target's compilers or emulator are missing.
        kit.devices.errors.DeviceError: the adb device that is to time (``[device]``) is not there or does not fit.
    """
    target = cfg.target_info()
    pristine = ensure_pristine(cfg.mnn)
    ws = _locked(workspace_base(cfg.mnn, pristine, target), pristine, index)
    box = device = None
    try:
        box = start_container(cfg, name or ws.root.name)
        toolchain.check_tools(target)
        gate = NodeLock(cfg.mnn.cache_dir / "node.lock")
        opts = job_settings(cfg).build
        host = None
        if target.cross:
            host_ws = _locked(workspace_base(cfg.mnn, pristine), pristine, None)
            host = HostBuild(host_ws, _prepared(cfg, host_ws, opts.host(), pristine, gate))
        if cfg.device.kind == "adb" and cfg.timing.enabled:  # before the native build: a missing device stops at once
            device = DeviceSession.open(cfg.device, cfg.timing.threads, target.arch, cfg.mnn.cache_dir)
        native = _prepared(cfg, ws, opts, pristine, gate)
        if device is not None:
            device.keep = [native.dir.resolve()]
    except BaseException:
        if device is not None:
            device.close()
        if box is not None:
            box.remove()
        ws.release()
        raise
    return Worker(cfg, ws, native, name=name or ws.root.name, mnn_version=cfg.mnn.version,
                  build_flags=native_meta(native).get("build_flags", ""), gate=gate, host=host,
                  container=box, device=device)


def start_container(cfg: EvalConfig, name: str) -> icontainer.WorkerContainer | None:
    """``container.mode = "docker"``: the worker's container (image checked against the lock), active for this
    process's commands from now on; None on the host.

    Raises:
        kit.images.ImageError: no daemon, no image, an image the lock does not pin (unless allowed), or the
            container does not start."""
    c = cfg.container
    if c.mode == "host":
        return None
    check = icontainer.check_image(c.image, c.docker_host, c.lock_file, c.allow_image_mismatch)
    ro = [cfg.tasks.dir, Path(proc.__file__).parents[2], *c.ro_paths]  # the kit package
    ro += [s.path if s.path.is_dir() else s.path.parent for s in cfg.candidates.sources]
    box = icontainer.start_worker_container(
        image=check, cache_dir=cfg.mnn.cache_dir, ro_paths=ro, run=cfg.run.dir.name, worker=name,
        docker_host=c.docker_host, limits=icontainer.ContainerLimits(c.cpus, c.memory_mb, c.pids, c.tmp_mb,
                                                                    c.start_timeout_s))
    log.info("worker %s: container %s of %s started in %.1f s", name, box.volume, check.image, box.start_s)
    box.activate()
    return box
