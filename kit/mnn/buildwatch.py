"""How far a running ninja build is: steps planned (a dry run) and steps finished (``.ninja_log``), reported to a
callback from a background thread, for a progress display of a long build (the native baseline).

Planned: ``ninja -n`` in the build directory prints one ``[i/N]`` line per command it would run; ``N`` of the
last line is the build's step count (844 for MNN 3.2.2 with converter and tools; the dry run takes 0.03 s on
that configured tree, 2 cores).  Finished: ninja appends one line to ``<build>/.ninja_log`` per output of each
command as the command ends (``start_ms end_ms mtime output command_hash``); the lines of one command share
start, end and hash, so a command with several outputs counts once.  Only lines appended after the watch
started count; a log that ninja rewrote at its start (recompaction: the file shrank or was replaced) is counted
from its new end.

The watch never fails or slows the build: the thread only reads files, an exception in the callback is logged
once and ignored, and a dry run that fails leaves the build unplanned (no total; a stall limit still works).

Stall limit: :meth:`BuildWatch.stalled` is the ``stop_when`` of the build's :func:`kit.host.proc.run`: True once no
command finished for ``stall_s`` seconds of the build's running time (a timing phase's pause not counted), so a
long build runs as long as it makes progress and a hung one stops (``build.stall_timeout_s``).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from kit.host import proc

log = logging.getLogger("kit")

#: ``callback(done, total, elapsed_s)``: steps finished so far and planned (ints), seconds since the build began
ProgressFn = Callable[[int, int, float], None]

#: seconds between two reads of ``.ninja_log``
POLL_S = 0.5
#: seconds :meth:`BuildWatch.stop` waits for the last report
STOP_WAIT_S = 2.0

_STEP = re.compile(r"^\[(\d+)/(\d+)\]", re.MULTILINE)


def planned_steps(build_dir: Path, env: dict[str, str], targets: Sequence[str] = (), timeout_s: float = 120.0) -> int:
    """The number of commands ``ninja`` would run now in ``build_dir`` for ``targets`` (all by default): ``N`` of
    the dry run's last ``[i/N]`` line; 0 when there is nothing to do or the dry run failed.

    ``env`` is the build's environment, with ``NINJA_STATUS`` pinned to ninja's default (``[%f/%t] ``), the
    format parsed here."""
    res = proc.run(["ninja", "-n", *targets], cwd=build_dir, env={**env, "NINJA_STATUS": "[%f/%t] "},
                   timeout_s=timeout_s)
    if not res.ok:
        log.debug("ninja -n in %s failed (exit %s): %s", build_dir, res.returncode, res.output[-500:])
        return 0
    steps = _STEP.findall(res.stdout)
    return int(steps[-1][1]) if steps else 0


class LogCounter:
    """Counts the commands that finish from now on, from the lines ninja appends to the log at ``path``
    (normally ``<build>/.ninja_log``; it need not exist yet)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.count = 0
        self._ino, self._offset = self._stat()
        self._partial = b""  # a line ninja is still writing
        self._last: tuple[bytes, ...] = ()  # (start, end, hash) of the last line counted

    def _stat(self) -> tuple[int, int]:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return 0, 0
        return st.st_ino, st.st_size

    def poll(self) -> int:
        """Read what was appended since the last call; return the commands counted so far."""
        ino, size = self._stat()
        if ino != self._ino or size < self._offset:  # rewritten by ninja's recompaction, or first created
            created = self._ino == 0 and self._offset == 0
            self._ino, self._offset, self._partial = ino, 0 if created else size, b""
        if size <= self._offset:
            return self.count
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read(size - self._offset)
        self._offset += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            fields = line.split(b"\t")
            if line.startswith(b"#") or len(fields) < 5:
                continue
            key = (fields[0], fields[1], fields[4])
            if key != self._last:
                self.count += 1
                self._last = key
        return self.count


class BuildWatch:
    """Counts the build's finished commands every :data:`POLL_S` seconds from a daemon thread and reports
    ``callback(done, total, elapsed_s)`` while ``done`` changes (and once at the start; no reports without a
    callback); :meth:`stop` ends it with a last report.  ``done`` never exceeds ``total`` (0: not planned) and
    never decreases.  With ``stall_s`` (seconds), :meth:`stalled` says when no command finished for that long."""

    def __init__(self, build_dir: Path, total: int, callback: ProgressFn | None, poll_s: float | None = None,
                 stall_s: float | None = None) -> None:
        self.total = total
        self.counter = LogCounter(build_dir / ".ninja_log")
        self.stall_s = stall_s
        #: the build was stopped by :meth:`stalled` (set by it)
        self.stalled_out = False
        self._callback = callback
        self._poll_s = POLL_S if poll_s is None else poll_s
        self._t0 = time.monotonic()
        self._reported = -1
        self._failed = False
        self._ok = False
        self._seen = 0  # the count :meth:`stalled` last saw, and the running seconds it changed at
        self._seen_at = 0.0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ninja-progress", daemon=True)

    def start(self) -> BuildWatch:
        self._thread.start()
        return self

    @property
    def done(self) -> int:
        """Commands finished so far (at most ``total`` when planned)."""
        return min(self.counter.count, self.total) if self.total else self.counter.count

    def stalled(self, running_s: float) -> bool:
        """True (and :attr:`stalled_out` set) once no command finished in the last ``stall_s`` seconds of the
        build's running time ``running_s`` (as :func:`kit.host.proc.run` asks its ``stop_when``: paused time
        excluded); always False without ``stall_s``.  Cheap: it reads the count the thread keeps."""
        count = self.counter.count  # the raw count: a regenerated build.ninja may run more steps than planned
        if count != self._seen:
            self._seen, self._seen_at = count, running_s
        if self.stall_s is not None and running_s - self._seen_at >= self.stall_s:
            self.stalled_out = True
        return self.stalled_out

    def _report(self, done: int) -> None:
        if self._callback is None:
            return
        done = max(min(done, self.total), self._reported)
        if done == self._reported:
            return
        self._reported = done
        try:
            self._callback(done, self.total, time.monotonic() - self._t0)
        except Exception:  # a display must not break the build; say so once
            if not self._failed:
                self._failed = True
                log.warning("the build's progress display failed; the build goes on without it", exc_info=True)

    def _loop(self) -> None:
        stopping = False
        while True:
            try:
                done = self.counter.poll()
            except OSError as exc:  # the log unreadable for a moment: keep the last count
                log.debug("reading %s: %s", self.counter.path, exc)
                done = self.counter.count
            if stopping:  # the last report, here too: a callback that hangs holds this thread, not the build
                self._report(self.total if self._ok else done)
                return
            self._report(done)
            stopping = self._stopping.wait(self._poll_s)

    def stop(self, ok: bool) -> int:
        """End the watch with a last report: ``total`` when the build succeeded (ninja ran all it had to; a step
        pruned by a ``restat`` rule is never logged), else the steps counted.  Waits at most
        :data:`STOP_WAIT_S` seconds for it.  Returns the steps counted from the log."""
        self._ok = ok
        self._stopping.set()
        self._thread.join(timeout=STOP_WAIT_S)
        return self.counter.count


def watch(build_dir: Path, env: dict[str, str], targets: Sequence[str], callback: ProgressFn | None,
          stall_s: float | None = None) -> BuildWatch | None:
    """Plan (dry run) and start watching the build that is about to run in ``build_dir``, with the stall limit
    ``stall_s`` (seconds; None: none); None when there is nothing to watch (no steps and no stall limit, or
    the dry run could not run at all)."""
    try:
        total = planned_steps(build_dir, env, targets)
    except Exception:  # e.g. ninja missing: the build itself will say so
        log.debug("no progress for the build in %s", build_dir, exc_info=True)
        return None
    if total <= 0 and stall_s is None:
        return None
    # no plan: no progress to show (an up-to-date tree would show "0/0 steps"), but the stall limit holds
    return BuildWatch(build_dir, total, callback if total > 0 else None, stall_s=stall_s).start()
