"""Node-local exclusivity of timing: a readers-writer lock on a file in the cache directory.

Builds (and verification runs) hold the lock *shared*; a timing phase holds it *exclusive*, so on one
node a timing run never overlaps a build or another timing run, whichever process or Ray actor runs them.
``flock`` is released by the kernel when a process dies, so a killed worker never leaves the node locked.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class NodeGate:
    """``with gate.shared(): build()`` / ``with gate.exclusive(): time()`` on the lock file ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    @contextmanager
    def _hold(self, mode: int) -> Iterator[None]:
        fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, mode)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def shared(self):
        return self._hold(fcntl.LOCK_SH)

    def exclusive(self):
        return self._hold(fcntl.LOCK_EX)
