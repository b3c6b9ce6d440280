"""A sandboxed command's bounded directories (:attr:`kit.host.sandbox.View.bounded`): held by the kit while the
command runs and brought back once it has ended (:class:`Held`).

Why: the per-file limit (``sandbox.file_mb``) bounds each file a candidate's runner writes, not their number: a
kernel wrote 3 GB through several files into its output directory and they landed on the host disk.  Inside
the sandbox such a directory is a tmpfs of ``View.bound_bytes`` (bubblewrap's ``--size`` before ``--tmpfs``), so
a write past the bound fails there (ENOSPC).  The tmpfs lives in the sandbox's mount namespace, which ends with
the command; so before the command starts the kit opens the directory from outside
(``/proc/<the sandbox's init>/root/<path>``, while bubblewrap waits on ``--block-fd``) and keeps that descriptor:
it keeps the tmpfs alive after the namespace is gone.  After the exit the kit copies what the tmpfs holds into
the directory of the same name on the host (:func:`kit.host.fstree.copy_tree`: by descriptors, no link
followed, capped) and closes it, which frees the tmpfs.  A tmpfs that was full (free space under
:func:`_margin`) is not copied at all: the command reached its bound (:attr:`ProcResult.full`).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time

from kit.host import fstree
from kit.host.sandbox import SandboxError, View

#: seconds to wait for bubblewrap to report its child and set the tmpfs up
SETUP_S = 10.0
#: seconds between two looks for the tmpfs (bubblewrap mounts it a few ms after it reports its child; each look
#: is an open and a stat, ~20 us, and every run of a timing waits for it)
POLL_S = 0.0005


def _margin(bound_bytes: int) -> int:
    """Free bytes under which a bounded directory counts as full (a writer stopped by the bound leaves less
    than a write's worth; an honest run never comes near)."""
    return max(1 << 20, bound_bytes // 64)


class Held:
    """The bounded directories of one command (``view.bounded``): :meth:`args` for bubblewrap's command line,
    :meth:`attach` once it is started, :meth:`bring_back` once it has ended."""

    def __init__(self, view: View) -> None:
        self.view = view
        self._info_r, self._info_w = os.pipe()
        self._block_r, self._block_w = os.pipe()
        self.fds: dict[str, int] = {}

    @property
    def pass_fds(self) -> tuple[int, int]:
        """The descriptors the command must inherit (bubblewrap's ``--info-fd`` and ``--block-fd``)."""
        return self._info_w, self._block_r

    def args(self) -> list[str]:
        """bubblewrap's options that report its child's pid and make it wait for :meth:`attach`."""
        return ["--info-fd", str(self._info_w), "--block-fd", str(self._block_r)]

    def attach(self, proc: subprocess.Popen[bytes]) -> None:
        """Open each bounded directory inside the started sandbox of ``proc``, then let its command run.

        Raises:
            SandboxError: bubblewrap ended or did not set the directories up within :data:`SETUP_S` seconds (the
                command is killed first)."""
        os.close(self._info_w)
        os.close(self._block_r)
        try:
            pid = self._child_pid()
            deadline = time.monotonic() + SETUP_S
            for path in dict.fromkeys(self.view.bounded):
                self.fds[path] = self._open_inside(pid, path, deadline)
        except BaseException:
            os.close(self._block_w)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            self.close()
            raise
        finally:
            os.close(self._info_r)
        os.write(self._block_w, b"g")
        os.close(self._block_w)

    def discard(self) -> None:
        """The command did not start: close the pipes to bubblewrap."""
        for fd in (self._info_r, self._info_w, self._block_r, self._block_w):
            os.close(fd)

    def _child_pid(self) -> int:
        info, deadline = b"", time.monotonic() + SETUP_S
        while b"}" not in info:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._info_r], [], [], left)[0]:
                raise SandboxError(f"{self.view.step}: bubblewrap did not report its child in {SETUP_S} s")
            chunk = os.read(self._info_r, 4096)
            if not chunk:
                raise SandboxError(f"{self.view.step}: bubblewrap ended before it started its child")
            info += chunk
        return int(json.loads(info)["child-pid"])

    def _open_inside(self, pid: int, path: str, deadline: float) -> int:
        """The directory ``path`` as the sandbox of ``pid`` shows it, once its tmpfs is mounted (a device
        other than the host directory's)."""
        host_dev = os.stat(path).st_dev
        while True:
            try:
                fd = os.open(f"/proc/{pid}/root{path}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError as e:
                fd, why = -1, e.strerror
            else:
                if os.fstat(fd).st_dev != host_dev:
                    return fd
                os.close(fd)
                why = "not mounted yet"
            if time.monotonic() > deadline:
                raise SandboxError(f"{self.view.step}: the sandbox's bounded directory {path} did not appear ({why})")
            time.sleep(POLL_S)

    def bring_back(self) -> tuple[str, ...]:
        """Copy each bounded directory's content (the entries ``view.bring_back`` names, or all) to the host
        directory of the same name, but for one that is full: returns those (their content dropped).  Closes the
        descriptors (the tmpfs is freed).

        Raises:
            OSError: a copy failed (the kit's fault: a harness error)."""
        full = []
        try:
            for path, fd in self.fds.items():
                st = os.fstatvfs(fd)
                if st.f_bavail * st.f_frsize < _margin(self.view.bound_bytes):
                    full.append(path)
                else:
                    fstree.copy_tree(fd, path, only=self.view.bring_back)
        finally:
            self.close()
        return tuple(full)

    def close(self) -> None:
        """Close what is still open (idempotent)."""
        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}
