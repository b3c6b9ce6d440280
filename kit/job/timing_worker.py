"""What a timing worker owns and how it is set up (``dispatch.build_resource``: timing on other nodes than builds).

A :class:`TimingWorker` owns the native baseline a build worker shipped to it (:func:`kit.mnn.native.install_shipped`)
and its node's gate, and times what build workers ship (:func:`kit.job.pipeline.time_job`).  A timing node needs only
the kit: no compiler, no MNN source.  It runs the target's binaries natively when it has the target's
architecture (an aarch64 node timing a cross-built aarch64 target), or under the emulator when it is an x86_64
node standing in for an aarch64 one (the loopback tests: emulated timings, recorded and never scored); either
way every executable and library it receives is checked against the target's ELF machine before it is written
(:meth:`kit.host.shipping.Bundle.check_machine`).
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from kit.baselines.book import Book
from kit.host.nodelock import NodeLock
from kit.host.shipping import Bundle, elf_static
from kit.host.target import Target
from kit.job.options import JobSettings, baseline_book, job_settings, pin_timing
from kit.job.worker import Seal, scratch_root
from kit.mnn import toolchain
from kit.mnn.native import install_shipped
from kit.settings.config import EvalConfig
from kit.stages.timing import TimingOptions

log = logging.getLogger("kit")


@dataclass
class TimingWorker:
    """What a timing worker owns (``dispatch.build_resource``): the native baseline shipped from a build
    worker (``native_dir/lib``, ``native_dir/bin/mkb_runner``) and its node's gate.

    ``target``: the config's target on this node (its ``arch`` is the machine every file it receives must be
    for; ``emulated`` when this node is of another architecture and runs them under the emulator);
    ``static``: the shipped runner is static, so each side has a runner of its own (a cross build);
    ``how``: how this node runs the target's binaries, in words (``natively``, ``under qemu-aarch64-static``)."""

    cfg: EvalConfig
    native_dir: Path
    native_key: str
    name: str = "t0"
    gate: NodeLock | None = None
    stage: str = ""
    seal: Seal = field(default_factory=Seal)
    target: Target = field(default_factory=Target)
    static: bool = False
    how: str = "natively"

    @cached_property
    def settings(self) -> JobSettings:
        """:func:`kit.job.options.job_settings` on this node, the runner named by a label when each side has its own (the
        invocation digest then compares everything else)."""
        s = job_settings(self.cfg)
        label = f"static {self.target.arch} mkb_runner, one per side" if self.static else ""
        run = replace(s.timing.run, runner_label=label)
        return replace(s, timing=replace(s.timing, run=run), verify=replace(s.verify, run=run))

    @cached_property
    def scratch(self) -> Path:
        """As :attr:`Worker.scratch`."""
        return scratch_root(self.cfg.mnn.cache_dir)

    @cached_property
    def timing(self) -> TimingOptions:
        """As :attr:`Worker.timing`."""
        return pin_timing(self.settings.timing, self.cfg)

    @cached_property
    def baselines(self) -> Book:
        """As :attr:`Worker.baselines`: the tables of this timing node, for the shipped native build."""
        return baseline_book(self.cfg, self.native_key)

    def check_native(self, model: Path | None) -> None:
        """As :meth:`Worker.check_native`, for the shipped baseline (``model``: the job's shipped native model
        is new each time, so only the runner and the libraries are sealed; a static baseline has no ``lib/``)."""
        libs = sorted(p for p in self.lib_dir.iterdir() if p.is_file()) if self.lib_dir.is_dir() else []
        self.seal.check([self.runner, *libs])

    @property
    def runner(self) -> Path:
        return self.native_dir / "bin" / "mkb_runner"

    @property
    def device(self) -> None:
        """No adb device: this node times (a :class:`kit.job.place.TimingPlace` under its gate)."""
        return None

    @property
    def lib_dir(self) -> Path:
        return self.native_dir / "lib"


def setup_timing_worker(cfg: EvalConfig, index: int, name: str, native_key: str, native: Bundle) -> TimingWorker:
    """A timing worker (``dispatch.build_resource`` set): check that this node can run the target's binaries
    (natively on a node of the target's architecture; an x86_64 node standing in for an aarch64 one runs them
    under the emulator, its timings emulated and never scored), install the native baseline shipped from a
    build worker after checking every file of it against that architecture, and take the node's gate.

    Raises:
        kit.host.target.TargetError: this node can run the target's binaries neither natively nor emulated (names
            ``target.arch`` and this node's architecture), or the emulator is missing.
        kit.host.shipping.ArtefactError: a file of the shipped baseline is machine code of another architecture
            (names the file and both ELF machines).
    """
    target = cfg.target_info()
    target.check_runs_here()
    emulator = toolchain.emulator(target)
    how = f"under {Path(emulator[0]).name}" if emulator else "natively"
    if emulator:
        log.warning("timing worker %s: this node (%s) is %s and times the %s target %s: its timings are emulated "
                    "and never scored", name, socket.gethostname(), target.host_arch, target.arch, how)
    # no child tracking here: a timer's children (the runner) are direct children and die with it
    # (PR_SET_PDEATHSIG), and a timer owns no directory another run's timer could not be using too
    shipped = install_shipped(cfg.mnn.cache_dir, native_key, native, target.arch, how)
    static = elf_static((shipped / "bin" / "mkb_runner").read_bytes(), "the shipped native runner")
    return TimingWorker(cfg, shipped, native_key, name=name, gate=NodeLock(cfg.mnn.cache_dir / "node.lock"),
                 target=target, static=static, how=how)
