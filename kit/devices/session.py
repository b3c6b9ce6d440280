"""What a worker holds of its adb device for its life: :class:`DeviceSession`.

On the device a session owns ``<device.dir>/<host>-<pid>-<token>/`` (removed by :meth:`DeviceSession.close`):
``b/`` the native baseline (runners and models pushed once per session, content-addressed, kept) and ``j/``
the current job's files (its candidate's runner and model, the input sets, one folder per run; emptied after
each job).  The session is the :class:`kit.mnn.runner.RemoteRunner` of the timing runs (:meth:`~DeviceSession.start`,
:meth:`~DeviceSession.conditions`) and gives the timing stage its two phases:

* :meth:`~DeviceSession.prepare` (the runners' start-up: files pushed, runners started up to their rendezvous)
  and :meth:`~DeviceSession.hold` (the timed runs) each hold the device's lock (a file lock of this host, per
  serial): no other worker of the host starts or times on the device meanwhile.  This host's builds go on.
* :meth:`~DeviceSession.hold` first waits ``device.cooldown_s`` after the end of the last timed runs on the
  device, then until the hottest CPU zone is at most ``device.max_temp_c`` (up to ``cooldown_timeout_s``), then
  until the CPU load over ``load_sample_s`` is at most ``max_load_pct`` (up to ``load_wait_s``); a device still
  too hot or too busy refuses the job (:class:`~kit.devices.errors.DeviceBusy`).  The waits and the state
  read last are the job's :class:`~kit.results.records.DeviceState`.
* Candidate code runs on the device unconfined, as the shell user that owns the baseline: the baseline files
  and input sets a job uses are checked by sha256 on the device before and after its timed runs
  (:class:`~kit.devices.errors.BaselineTampered`; a changed file is pushed anew for the next job).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import secrets
import shlex
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from kit.devices import remote
from kit.devices import state as dstate
from kit.devices.adb import Adb
from kit.devices.errors import BaselineTampered, DeviceBusy, DeviceError, DeviceMismatch
from kit.host.nodelock import NodeLock
from kit.mnn import runner as mrunner
from kit.results.records import DeviceState
from kit.settings.device import DeviceSection
from kit.suite.tasks import sha256_file

log = logging.getLogger("kit")


class DeviceSession:
    """One worker's hold on the adb device of ``section`` (module docstring); open with :meth:`open`."""

    def __init__(self, adb: Adb, section: DeviceSection, cores: tuple[int, ...], root: str, lock_path: Path,
                 keep: Sequence[Path] = (), opened: DeviceState | None = None) -> None:
        self.adb, self.section, self.cores, self.root = adb, section, cores, root
        #: the device's state read when the session opened (its model, SoC, ABI, the timing cores and their
        #: maximum frequencies: what a baseline table of the device is keyed by, known before any timed run)
        self.opened = opened
        #: the host folders whose files are the native baseline (pushed once per session, kept there)
        self.keep = [Path(p).resolve() for p in keep]
        self.lock_path = lock_path
        self.label = f"adb:{adb.serial}"
        self._baseline: dict[str, str] = {}  # sha256 -> device path, kept for the session
        self._job: dict[str, str] = {}  # sha256 (a folder's: of its listing) -> device path, this job's
        self._watched: dict[str, str] = {}  # device path -> sha256 of what the job's runs must find there
        self._digests: dict[tuple[str, int, int], str] = {}
        self._evicted: list[str] = []  # device paths of baseline files found changed, to remove
        self._runs = 0
        self._state: DeviceState | None = None

    @classmethod
    def open(cls, section: DeviceSection, threads: int, arch: str, lock_dir: Path) -> DeviceSession:
        """Check the device (ready, its ABI runs ``arch``, the timing cores), make the session's folder on it
        (the lock file of the device goes to ``lock_dir``).

        Raises:
            kit.devices.errors.AdbMissing, kit.devices.errors.DeviceLost: no adb, or the device is not ready.
            DeviceMismatch: the device's ABI or cores do not fit the config."""
        adb = Adb.find(section.adb, section.serial, section.command_timeout_s)
        adb.check()
        raw = read_state(adb)
        abi, want = raw.props.get("ro.product.cpu.abi", ""), dstate.ABIS.get(arch, arch)
        if abi != want:
            raise DeviceMismatch(f"adb device {section.serial!r} has ABI {abi or 'unknown'!r}; target.arch = "
                                 f"{arch!r} needs {want!r}")
        online = sorted(c.index for c in raw.cpus if c.online)
        if section.cores:
            if not set(section.cores) <= set(online):
                raise DeviceMismatch(f"device.cores {section.cores}: the device's online cores are {online}")
            cores = tuple(sorted(section.cores))
        else:
            try:
                cores = dstate.big_cores(raw.cpus, threads)
            except ValueError as exc:
                raise DeviceMismatch(f"adb device {section.serial!r}: {exc}") from None
        root = f"{section.dir}/{_safe(socket.gethostname())}-{os.getpid()}-{secrets.token_hex(3)}"
        adb.shell(f"rm -rf {shlex.quote(root)} && mkdir -p {shlex.quote(root)}/b {shlex.quote(root)}/j")
        lock_dir.mkdir(parents=True, exist_ok=True)
        log.info("timing on adb device %s (%s), cores %s, folder %s", section.serial,
                 raw.props.get("ro.product.model", "?"), list(cores), root)
        opened = dstate.device_state(section.serial, raw, cores, None, section.load_sample_s)
        return cls(adb, section, cores, root, lock_dir / f"device-{_safe(section.serial)}.lock", opened=opened)

    # ------------------------------------------------------------------------------------------ remote runner

    def start(self, call: mrunner.RunnerCall) -> mrunner.StartedRun | mrunner.RunResult:
        """:class:`kit.mnn.runner.RemoteRunner`: start ``call`` on the device, pinned to the session's cores."""
        run_dir = f"{self.root}/j/r{self._runs}"
        self._runs += 1
        return remote.start(self.adb, call, self, run_dir, self.cores)

    def conditions(self, cores: tuple[int, ...]) -> dict[str, object]:
        """:class:`kit.mnn.runner.RemoteRunner`: the state :meth:`hold` read (governor, frequency, load, the device)."""
        s = self._state
        if s is None:
            raise DeviceError("the device's state was not read before the timed runs (timing outside hold())")
        return dict(governor=s.governor, freq_mhz=s.freq_mhz, load_1m=s.load_1m, device=s, emulated=s.emulated)

    def remote(self, local: Path) -> str:
        """:class:`kit.devices.remote.Pusher`: the device path of the host file or folder ``local``, pushed
        first when it is not there (a baseline file once per session, anything else once per job)."""
        local = local.resolve()
        if local.is_dir():
            files = sorted(p for p in local.rglob("*") if p.is_file())
            listing = "\n".join(f"{p.relative_to(local)}\0{self._sha(p)}" for p in files)
            key = hashlib.sha256(listing.encode()).hexdigest()
            where = self._job.get(key) or self._push(local, f"{self.root}/j/d/{key[:16]}", self._job, key)
            self._watched |= {f"{where}/{p.relative_to(local)}": self._sha(p) for p in files}
            return where
        sha = self._sha(local)
        baseline = any(local.is_relative_to(k) for k in self.keep)
        table, area = (self._baseline, "b") if baseline else (self._job, "j/f")
        where = table.get(sha) or self._push(local, f"{self.root}/{area}/{sha[:16]}/{local.name}", table, sha)
        if baseline:
            self._watched[where] = sha
        return where

    def _push(self, local: Path, where: str, table: dict[str, str], key: str) -> str:
        self.adb.push(local, where)
        table[key] = where
        return where

    def _sha(self, path: Path) -> str:
        st = path.stat()
        key = (str(path), st.st_size, st.st_mtime_ns)
        if key not in self._digests:
            self._digests[key] = sha256_file(path)
        return self._digests[key]

    # ------------------------------------------------------------------------------------------ phases

    @contextmanager
    def prepare(self) -> Iterator[None]:
        """The start-up of one job's runs: the device locked, the job's folder emptied first."""
        with self._locked():
            self._job, self._watched, self._runs, self._state = {}, {}, 0, None
            self.adb.shell(f"rm -rf {shlex.quote(self.root)}/j && mkdir -p {shlex.quote(self.root)}/j")
            yield

    def turn(self) -> AbstractContextManager[None]:
        """All batches of one timing stage on the device (its start-ups and timed runs) before another worker's:
        the node's turn (:meth:`kit.host.nodelock.NodeLock.turn`) on the device's lock file, taken before it
        (never while holding it)."""
        return NodeLock(self.lock_path).turn()

    @contextmanager
    def hold(self) -> Iterator[None]:
        """The timed runs of one job: the device locked, the cool-down and the load waited for and the state
        read (module docstring), the watched files checked before and after; the job's folder emptied after.

        Raises:
            DeviceBusy: still too hot or too busy after the configured waits.
            BaselineTampered: a baseline file or input set changed on the device.
            kit.devices.errors.DeviceLost: the device went away."""
        with self._locked() as lock:
            failed = True
            try:
                self._state = self._settle(lock)
                self._check_watched("before")
                yield
                failed = False
                self._check_watched("after")
            finally:
                lock.seek(0)
                lock.truncate()
                lock.write(f"{time.time():.3f}\n")
                lock.flush()
                self._clean(quiet=failed)

    def _settle(self, lock) -> DeviceState:
        """Wait for the cool-down, the temperature and the load (module docstring); the state read last."""
        s = self.section
        t0 = time.monotonic()
        lock.seek(0)
        last = lock.read().strip()
        slept_s = 0.0
        if s.cooldown_s and last.replace(".", "", 1).isdigit():
            slept_s = max(0.0, float(last) + s.cooldown_s - time.time())
            time.sleep(slept_s)
        raw = read_state(self.adb)
        temp, zone = dstate.hottest(raw.zones)
        t_hot = time.monotonic()  # the wait reported: the sleep and the temperature loop, not the first read
        while s.max_temp_c is not None and temp is not None and temp > s.max_temp_c:
            if time.monotonic() - t0 >= s.cooldown_timeout_s:
                raise DeviceBusy(f"adb device {self.adb.serial!r}: {zone} at {temp:.1f} °C after {time.monotonic() - t0:.0f} s "
                                 f"of cool-down (device.max_temp_c = {s.max_temp_c:g}, cooldown_timeout_s = "
                                 f"{s.cooldown_timeout_s:g})")
            time.sleep(s.poll_s)
            raw = read_state(self.adb)
            temp, zone = dstate.hottest(raw.zones)
        cooled_s, t1 = slept_s + time.monotonic() - t_hot, time.monotonic()
        while True:
            time.sleep(s.load_sample_s)
            load = dstate.busy_pct(raw.stat, dstate.parse_stat(self.adb.shell(dstate.STAT_SCRIPT).stdout.strip()))
            waited = time.monotonic() - t1 - s.load_sample_s
            if load is None or load <= s.max_load_pct:
                break
            if waited >= s.load_wait_s:
                raise DeviceBusy(f"adb device {self.adb.serial!r}: CPU load {load:.1f} % over {s.load_sample_s:g} s is "
                                 f"above device.max_load_pct = {s.max_load_pct:g} % (waited {waited:.0f} s, "
                                 f"device.load_wait_s = {s.load_wait_s:g}); 1-minute load average {raw.load_1m}")
            time.sleep(s.poll_s)
            raw = read_state(self.adb)
        return dstate.device_state(self.adb.serial, raw, self.cores, load, s.load_sample_s, cooled_s, max(0.0, waited))

    def _check_watched(self, when: str) -> None:
        """Refuse a job whose baseline files or input sets on the device are not what was pushed."""
        if not self._watched:
            return
        out = self.adb.shell("sha256sum " + " ".join(shlex.quote(p) for p in sorted(self._watched)) + " 2>&1; true")
        found = {parts[1]: parts[0] for line in out.stdout.splitlines() if len(parts := line.split(None, 1)) == 2}
        bad = sorted(p for p, sha in self._watched.items() if found.get(p) != sha)
        if bad:
            for table in (self._baseline, self._job):
                for key in [k for k, v in table.items() if any(b == v or b.startswith(v + "/") for b in bad)]:
                    self._evicted.append(table.pop(key))  # removed with the job's folder, pushed anew next time
            raise BaselineTampered(f"{len(bad)} file(s) of the native baseline or the input sets on the device changed "
                                   f"{when} this candidate's timed runs (its code runs there as the same user); "
                                   f"first: {bad[0]}")

    def _clean(self, quiet: bool) -> None:
        """Empty the job's folder on the device, and remove the baseline files found changed."""
        paths = [f"{self.root}/j", *self._evicted]
        try:
            self.adb.shell("rm -rf " + " ".join(shlex.quote(p) for p in paths))
            self._evicted = []
        except DeviceError as exc:
            if not quiet:
                log.warning("could not empty %s/j on the device: %s", self.root, exc)
        self._job, self._watched = {}, {}

    @contextmanager
    def _locked(self) -> Iterator:
        with open(self.lock_path, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield lock
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def close(self) -> None:
        """Remove the session's folder from the device (quietly: the device may be gone)."""
        try:
            self.adb.shell(f"rm -rf {shlex.quote(self.root)}", timeout_s=30)
        except DeviceError as exc:
            log.warning("could not remove %s from adb device %s: %s", self.root, self.adb.serial, exc)


def read_state(adb: Adb) -> dstate.Raw:
    """The device's state (:data:`kit.devices.state.STATE_SCRIPT`), parsed.

    Raises:
        kit.devices.errors.DeviceLost: the device went away."""
    return dstate.parse_state(adb.shell(dstate.STATE_SCRIPT).stdout)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
