"""Waiting on a running command: :class:`_Pipes` pumps its pipes with one selector in the calling thread and
notices the leader's exit; :func:`_wait_exit` waits for an exit on a pidfd; :func:`_kill_group` kills a
command's session after SIGTERM then SIGKILL."""

from __future__ import annotations

import fcntl
import math
import os
import select
import selectors
import signal
import subprocess
import time

from kit.host.proc import pause
from kit.host.proc.capture import Capture
from kit.host.proc.sessions import kill_pipe_holders, kill_session

#: seconds a command's pipes may stay open after its leader exited; then the kit stops reading them
PIPE_GRACE_S = 0.5
#: bytes asked for (F_SETPIPE_SZ) for the pipes of a batched command (:meth:`_Pipes.batch`), Linux's default cap
BATCH_PIPE_BYTES = 1 << 20


class _Pipes:
    """The parent's ends of a command's pipes, pumped by one selector in the calling thread (no threads): reads
    stdout and stderr as they come, writes ``stdin_bytes`` (then closes stdin), and notices the leader's exit
    through a pidfd (at once; without one, at the next step).  Once the leader has exited, the pipes get
    :data:`PIPE_GRACE_S` seconds to reach EOF; then what is left of its session and whatever holds their other
    ends is killed, and the kit stops reading them (closes its ends): nothing outlives a command's leader
    by more than that, whatever it did with the pipes.

    What is read goes into ``captures`` (stdout's, stderr's: :class:`Capture`, bounded whatever the command
    prints).  With ``ready_line``, the first stdout line equal to it is taken out of the output and sets
    :attr:`seen`."""

    def __init__(self, proc: subprocess.Popen[bytes], stdin_bytes: bytes | None, ready_line: bytes | None = None,
                 captures: tuple[Capture, Capture] | None = None):
        self.proc = proc
        self.sel = selectors.DefaultSelector()
        self.data = dict(zip(("out", "err"), captures or (Capture(256 * 1024), Capture(256 * 1024))))
        self.want = None if ready_line is None else b"\n" + ready_line + b"\n"
        self.seen = False
        self.exited_at: float | None = None
        # stdout not yet passed on while the ready line is looked for (a line start before the first byte)
        self._held = b"\n"
        self._at_start = True
        self._todo = memoryview(stdin_bytes or b"")
        self.batch_s = 0.0  # see batch()
        self._read_at: float | None = None
        assert proc.stdout is not None and proc.stderr is not None
        self.sel.register(proc.stdout.fileno(), selectors.EVENT_READ, "out")
        self.sel.register(proc.stderr.fileno(), selectors.EVENT_READ, "err")
        if stdin_bytes is not None and proc.stdin is not None:
            if stdin_bytes:
                os.set_blocking(proc.stdin.fileno(), False)
                self.sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE, "in")
            else:
                self._close_stdin()
        self.cpu_s: float | None = None  # see _reap
        self.pidfd: int | None = None
        try:
            self.pidfd = os.pidfd_open(proc.pid)
            self.sel.register(self.pidfd, selectors.EVENT_READ, "exit")
        except (AttributeError, OSError):  # not Linux, an old kernel, or seccomp: proc.poll() each step
            pass

    def _close_stdin(self) -> None:
        stdin = self.proc.stdin
        if stdin is not None and not stdin.closed:
            try:
                self.sel.unregister(stdin.fileno())
            except (KeyError, ValueError):
                pass
            try:
                stdin.close()
            except OSError:  # BrokenPipeError on flush: the child closed its end
                pass

    def _ends(self) -> list[int]:
        return [key.fd for key in self.sel.get_map().values() if key.data in ("out", "err", "in")]

    @property
    def stdout_open(self) -> bool:
        """Still reading stdout (no EOF yet, not given up)."""
        return any(key.data == "out" for key in self.sel.get_map().values())

    def batch(self, batch_s: float) -> None:
        """Read the output at most every ``batch_s`` seconds from now on (the exit is still seen at once), with
        pipes of :data:`BATCH_PIPE_BYTES` where the kernel allows: a timing run's stamp stream (kit.mnn.stamps)
        is a line per clock reading, and a reader woken by each line took the CPU from the runner in the middle
        of its forward (fixture engine, 2-core VM: +20-65 us a forward through a pipe with a reader, +3-9 us to
        /dev/null or a file)."""
        self.batch_s = batch_s
        for f in (self.proc.stdout, self.proc.stderr):
            try:
                fcntl.fcntl(f.fileno(), fcntl.F_SETPIPE_SZ, BATCH_PIPE_BYTES)  # type: ignore[union-attr]
            except (OSError, AttributeError, ValueError):
                pass  # above /proc/sys/fs/pipe-max-size, or not a pipe: the default size (64 KiB)

    def _hold(self, wait_s: float) -> bool:
        """While batching, wait out the rest of ``batch_s`` since the last read watching only the exit; True
        when the step may read now."""
        if not self.batch_s or self._read_at is None or self.exited_at is not None or self.pidfd is None:
            return True
        gap = self._read_at + self.batch_s - time.monotonic()
        if gap <= 0 or select.select([self.pidfd], [], [], min(gap, wait_s))[0]:
            return True  # the hold is over, or the leader exited: read what there is now
        return gap <= wait_s  # waited out the hold (read now), or all of wait_s (not yet)

    def step(self, wait_s: float) -> bool:
        """Wait up to ``wait_s`` seconds for anything to do, do it; True once the leader has exited and the
        pipes are closed (at EOF, or given up :data:`PIPE_GRACE_S` after the exit)."""
        if not self._hold(wait_s):
            return False
        if self.exited_at is not None:
            wait_s = max(0.0, min(wait_s, self.exited_at + PIPE_GRACE_S - time.monotonic()))
        for key, _ in self.sel.select(wait_s) if self._ends() or self.exited_at is None else ():
            if key.data == "in":
                try:
                    n = os.write(key.fd, self._todo[:65536])
                    self._todo = self._todo[n:]
                except BlockingIOError:
                    pass
                except OSError:  # BrokenPipeError: the child closed its stdin
                    self._todo = memoryview(b"")
                if not self._todo:
                    self._close_stdin()
            elif key.data == "exit":
                self.sel.unregister(key.fd)
                self._reap()
            else:
                size = BATCH_PIPE_BYTES if self.batch_s else 65536
                chunk = os.read(key.fd, size)
                # a full read: the pipe was full, its writer blocked (a flood, no stamp stream): read on at once
                self._read_at = time.monotonic() if len(chunk) < size else None
                if chunk and key.data == "out" and self.want is not None and not self.seen:
                    self._find_ready(chunk)
                elif chunk:
                    self.data[key.data].feed(chunk)
                else:
                    self.sel.unregister(key.fd)
        if self.exited_at is None and (self.pidfd is None and self._reap() is not None
                                       or self.proc.returncode is not None):
            self.exited_at = time.monotonic()
        if self.exited_at is None:
            return False
        if self._ends() and time.monotonic() - self.exited_at >= PIPE_GRACE_S:
            # the leader is gone but something still holds its pipes: kill it and stop reading
            kill_session(self.proc.pid)
            kill_pipe_holders(self._ends())
            self.give_up()
        return not self._ends()

    def _reap(self) -> int | None:
        """``proc.poll()``, reaping by ``wait4`` so that the kernel's accounting of the command is kept:
        :attr:`cpu_s`, its CPU seconds and those of the descendants it waited for (user + system)."""
        if self.proc.returncode is None:
            try:
                pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere
                return self.proc.poll()
            if pid == self.proc.pid:
                self.proc.returncode = os.waitstatus_to_exitcode(status)
                self.cpu_s = usage.ru_utime + usage.ru_stime
        return self.proc.returncode

    def _find_ready(self, chunk: bytes) -> None:
        """Look for the ready line at a line start in ``chunk`` and the bytes held back before it; pass the
        output on without it (the rendezvous line is protocol, not output), holding back a tail that could
        begin it."""
        want = self.want
        assert want is not None
        buf = self._held + chunk
        i = buf.find(want)
        if i >= 0:
            self._pass_out(buf[: i + 1])
            self._pass_out(buf[i + len(want):])
            self._held = b""
            self.seen = True
        else:
            self._pass_out(buf[: len(buf) - len(want)])
            self._held = buf[len(buf) - len(want):]

    def _pass_out(self, data: bytes) -> None:
        if data and self._at_start:  # the line start assumed before the first byte is no output
            data, self._at_start = data[1:], False
        if data:
            self.data["out"].feed(data)

    def drain(self) -> None:
        """Step until the pipes are closed; the leader must be dead or dying (bounded by the grace)."""
        while not self.step(pause.PAUSE_POLL_S):
            pass

    def give_up(self) -> None:
        """Stop reading and writing: close our ends of the pipes (idempotent)."""
        self._close_stdin()
        for fd in self._ends():
            self.sel.unregister(fd)

    def close(self) -> tuple[Capture, Capture]:
        """Close everything (the pipes, the pidfd, the selector); returns what was kept of stdout and stderr."""
        if self._held and not self.seen:
            self._pass_out(self._held)
            self._held = b""
        self.give_up()
        for f in (self.proc.stdout, self.proc.stderr):
            if f is not None:
                f.close()
        if self.pidfd is not None:
            try:
                self.sel.unregister(self.pidfd)
            except (KeyError, ValueError):
                pass
            os.close(self.pidfd)
            self.pidfd = None
        self.sel.close()
        return self.data["out"], self.data["err"]


def _kill_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break  # the leader's group is empty; other groups of its session may not be
        _wait_exit(proc, grace_s)  # once the leader is gone, members of its group may remain: SIGKILL them too
    kill_session(proc.pid)


def _wait_exit(proc: subprocess.Popen[bytes], timeout_s: float | None) -> bool:
    """Wait up to ``timeout_s`` seconds (None: for ever) for ``proc`` to exit, and reap it.  Returns True when
    it has exited.

    ``Popen.wait(timeout)`` polls with sleeps that double up to 50 ms (a 25 ms command is seen to end at
    ~31 ms); a pidfd (Linux >= 5.3) wakes at the exit itself.  Elsewhere ``Popen.wait`` does the waiting.
    (A running command's own exit is watched by :class:`_Pipes`; this is for the kills.)"""
    if proc.returncode is not None:
        return True
    if timeout_s is None:
        proc.wait()
        return True
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux, an old kernel, or seccomp: the polling wait
        try:
            proc.wait(timeout=timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False
    deadline = time.monotonic() + timeout_s
    exited = False
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while not exited:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            # poll takes int milliseconds: rounded up (never early), at most a day per call (inf, 1e9 s)
            exited = bool(poller.poll(math.ceil(min(left, 86400.0) * 1000)))
    finally:
        os.close(fd)
    if exited:
        proc.wait()  # a zombie now: reaped at once
    return exited or proc.poll() is not None
