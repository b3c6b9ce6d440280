"""Folders a candidate's code could write (the runner's output directory, a timing run's directories, a job's
scratch), walked, copied and removed by file descriptors: iteratively (a tree 2000 levels deep is no deeper a
recursion than a flat one), without following a link (every directory is opened ``O_NOFOLLOW`` relative to
its parent's descriptor, so a link swapped in for a directory is unlinked, never entered), counting entries,
depth and the bytes of regular files against :class:`Caps`.

Why: ``shutil.rmtree`` recurses once per level and raised RecursionError on a 2000-level tree written by a
candidate (with ``ignore_errors=True`` too), which took the kit's worker down with no record, and every later
check died the same way on the tree left in its scratch.

Removing never stops at a cap (what is over a cap is removed all the same; the :class:`Tally` says which cap
was crossed); walking (:func:`scan`) and copying (:func:`copy_tree`) stop at the first entry over a cap.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field

#: how a directory of a candidate's is opened: never through a link, never blocking on a FIFO's open
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
#: directories held open at once (each holds two descriptors: its own and the scandir's); deeper levels are
#: moved up under the root first (:func:`remove`), so a deep tree needs no more descriptors than this
MAX_OPEN = 48


@dataclass(frozen=True)
class Caps:
    """What a candidate's folder may hold: ``entries`` (files, directories, links, anything), ``depth`` (levels
    of directories below the folder) and ``total_bytes`` (the summed sizes of its regular files, bytes)."""

    entries: int = 65_536
    depth: int = 32
    total_bytes: int = 4 << 30


#: the caps of every folder a candidate's code writes (the runner's output directory and a job's scratch)
CAPS = Caps()


@dataclass
class Tally:
    """What a walk saw: ``entries``, the deepest ``depth`` (1: the folder's own entries), ``total_bytes`` of
    regular files, and ``over``: the first cap crossed, in words naming it ("" while none is)."""

    entries: int = 0
    depth: int = 0
    total_bytes: int = 0
    over: str = ""

    def count(self, caps: Caps, depth: int, st: os.stat_result) -> None:
        self.entries += 1
        self.depth = max(self.depth, depth)
        self.total_bytes += st.st_size if stat.S_ISREG(st.st_mode) else 0
        if self.over:
            return
        if self.entries > caps.entries:
            self.over = f"more than {caps.entries} entries (the kit's cap on entries)"
        elif self.depth > caps.depth:
            self.over = f"directories more than {caps.depth} levels deep (the kit's cap on depth)"
        elif self.total_bytes > caps.total_bytes:
            self.over = f"more than {caps.total_bytes} bytes in files (the kit's cap on total bytes)"


@dataclass
class _Level:
    fd: int
    name: str  # in the parent level's directory
    depth: int  # of this directory's entries
    it: os.ScandirIterator = field(repr=False)  # type: ignore[type-arg]
    seen: int = 0  # entries its current listing yielded


def _open_level(parent_fd: int, name: str, depth: int) -> _Level:
    fd = os.open(name, _DIR, dir_fd=parent_fd)
    try:
        return _Level(fd, name, depth, os.scandir(fd))
    except BaseException:
        os.close(fd)
        raise


def _close(levels: list[_Level]) -> None:
    for lvl in levels:
        lvl.it.close()
        os.close(lvl.fd)


def remove(path: str | os.PathLike[str], caps: Caps = CAPS) -> Tally:
    """Remove ``path`` (a directory and all under it, a file, or a link itself; nothing if it does not exist).

    Returns:
        the :class:`Tally` of what was removed; ``over`` names the first cap it crossed (removed anyway).
    Raises:
        OSError: something could not be removed (permissions, a busy mount); what could be is gone."""
    tally = Tally()
    parent, name = os.path.split(os.path.abspath(os.fspath(path)))
    try:
        pfd = os.open(parent, _DIR)
    except FileNotFoundError:
        return tally
    try:
        try:
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
        except FileNotFoundError:
            return tally
        if not stat.S_ISDIR(st.st_mode):
            tally.count(caps, 0, st)
            os.unlink(name, dir_fd=pfd)
            return tally
        _remove_dir(pfd, name, caps, tally)
    finally:
        os.close(pfd)
    return tally


def _remove_dir(pfd: int, name: str, caps: Caps, tally: Tally) -> None:
    """Empty and remove directory ``name`` of ``pfd``: depth first, a directory below :data:`MAX_OPEN` open
    levels moved up under the top one (a unique name) and emptied from there."""
    stack = [_open_level(pfd, name, 1)]
    hoisted: dict[str, int] = {}  # name under the top directory → the depth of its entries
    serial = 0
    try:
        while stack:
            lvl = stack[-1]
            entry = next(lvl.it, None)
            if entry is None:
                _leave(stack, pfd)
                continue
            lvl.seen += 1
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            up = len(stack) == 1 and entry.name in hoisted  # counted where it was found
            depth = hoisted.pop(entry.name) if up else lvl.depth
            if not up:
                tally.count(caps, depth, st)
            if not stat.S_ISDIR(st.st_mode):
                os.unlink(entry.name, dir_fd=lvl.fd)
            elif len(stack) < MAX_OPEN:
                stack.append(_open_level(lvl.fd, entry.name, depth + 1))
            else:
                serial = _hoist(lvl.fd, entry.name, stack[0].fd, serial)
                hoisted[f".mkb-up-{serial}"] = depth
    finally:
        _close(stack)


def _leave(stack: list[_Level], pfd: int) -> None:
    """The top level's listing is done: remove its directory, or list it again while a listing finds entries
    (names moved up under it while it was listed)."""
    lvl = stack.pop()
    lvl.it.close()
    parent = stack[-1].fd if stack else pfd
    try:
        os.rmdir(lvl.name, dir_fd=parent)
    except OSError as e:
        if e.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not lvl.seen:
            os.close(lvl.fd)
            raise
        lvl.seen = 0
        lvl.it = os.scandir(lvl.fd)
        stack.append(lvl)
        return
    os.close(lvl.fd)


def _hoist(fd: int, name: str, top_fd: int, serial: int) -> int:
    """Move directory ``name`` of ``fd`` under ``top_fd`` as ``.mkb-up-<n>`` (a name not taken); returns n."""
    for _ in range(1000):
        serial += 1
        try:
            os.stat(f".mkb-up-{serial}", dir_fd=top_fd, follow_symlinks=False)
            continue  # taken
        except FileNotFoundError:
            pass
        os.rename(name, f".mkb-up-{serial}", src_dir_fd=fd, dst_dir_fd=top_fd)
        return serial
    raise OSError(errno.EEXIST, f"no free name to move {name} up to")


def scan(path: str | os.PathLike[str], caps: Caps = CAPS) -> Tally:
    """Walk directory ``path`` without changing it, up to the first entry over a cap.

    Raises:
        OSError: ``path`` is not a directory (a link to one included), or cannot be read."""
    tally = Tally()
    fd = os.open(os.fspath(path), _DIR)
    _walk(fd, caps, tally, None)
    return tally


def copy_tree(src_fd: int, dst: str | os.PathLike[str], caps: Caps = CAPS,
              only: Sequence[str] | None = None) -> Tally:
    """Copy what directory ``src_fd`` holds into the existing directory ``dst``, up to and including the first
    entry over a cap (so that a :func:`scan` of ``dst`` finds the cap crossed too): directories and regular
    files as they are, a link as a link (its target text), a FIFO as a FIFO, nothing else; ``only``: just the
    entries of these names directly in it (and what they hold), None: all.  ``src_fd`` stays open (the
    caller's).

    Raises:
        OSError: reading ``src_fd`` or writing ``dst`` failed."""
    tally = Tally()
    dfd = os.open(os.fspath(dst), _DIR)
    _walk(os.dup(src_fd), caps, tally, dfd, None if only is None else frozenset(only))
    return tally


def _walk(root_fd: int, caps: Caps, tally: Tally, dst_fd: int | None, only: frozenset[str] | None = None) -> None:
    """Walk from ``root_fd`` (taken over: closed here), counting into ``tally``; with ``dst_fd`` (taken over
    too), mirror each entry there; ``only``: of ``root_fd``'s own entries just those (None: all)."""
    try:
        root = _Level(root_fd, "", 1, os.scandir(root_fd))
    except BaseException:
        os.close(root_fd)
        if dst_fd is not None:
            os.close(dst_fd)
        raise
    stack = [root]
    dsts = [dst_fd] if dst_fd is not None else []
    try:
        while stack and not tally.over:
            lvl = stack[-1]
            entry = next(lvl.it, None)
            if entry is None:
                _close([stack.pop()])
                if dsts:
                    os.close(dsts.pop())
                continue
            if only is not None and lvl.depth == 1 and entry.name not in only:
                continue
            st = entry.stat(follow_symlinks=False)
            tally.count(caps, lvl.depth, st)
            descend = stat.S_ISDIR(st.st_mode) and not tally.over and len(stack) < MAX_OPEN
            if dsts:
                _mirror(lvl.fd, entry.name, st, dsts[-1])
                if descend:
                    dsts.append(os.open(entry.name, _DIR, dir_fd=dsts[-1]))
            if descend:
                stack.append(_open_level(lvl.fd, entry.name, lvl.depth + 1))
    finally:
        _close(stack)
        for fd in dsts:
            os.close(fd)


def _mirror(fd: int, name: str, st: os.stat_result, dst_fd: int) -> None:
    """Make entry ``name`` of ``fd`` (of stat ``st``) in ``dst_fd``."""
    if stat.S_ISDIR(st.st_mode):
        os.mkdir(name, 0o755, dir_fd=dst_fd)
    elif stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(name, dir_fd=fd), name, dir_fd=dst_fd)
    elif stat.S_ISFIFO(st.st_mode):
        os.mkfifo(name, 0o644, dir_fd=dst_fd)
    elif stat.S_ISREG(st.st_mode):
        src = os.open(name, _FILE, dir_fd=fd)
        try:
            if not stat.S_ISREG(os.fstat(src).st_mode):
                return  # swapped meanwhile: nothing
            out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                          dir_fd=dst_fd)
            try:
                while os.sendfile(out, src, None, 1 << 24):
                    pass
            finally:
                os.close(out)
        finally:
            os.close(src)
