"""Raw tensor directories: the exchange format between the kit and a runner (``mkb_runner`` or the fixture engine).

A directory holds ``manifest.txt`` with one line per tensor, ``name dtype ndim d0 d1 ...`` (dtype ``float32`` or
``int32``), and ``<name>.bin`` per tensor with its data as raw little-endian C-order bytes.  The manifest order is
meaningful (it is the order of the model's inputs or outputs).

A runner's output directory is written by a process that runs candidate code, so everything read from it is read
as hostile: no symbolic link is followed (a ``y.bin`` linked to ``/dev/zero`` made ``Path.read_bytes()`` read
until memory ran out, ~8 GB), only regular files are opened (a FIFO would block the reader for ever), and no more
is read than a file may hold (:func:`read_regular`).  What breaks those rules is :class:`PlantedFileError`.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

import numpy as np

MANIFEST = "manifest.txt"
#: the largest manifest read: a line per tensor of ~100 bytes, so room for ~10 000 tensors
MAX_MANIFEST_BYTES = 1 << 20
#: the largest tensor file read: MNN's ``Tensor::size()`` is an ``int`` (bytes), so no tensor holds 2 GiB
MAX_TENSOR_BYTES = (1 << 31) - 1

#: wire dtype name → little-endian numpy dtype
WIRE_DTYPES: dict[str, np.dtype] = {"float32": np.dtype("<f4"), "int32": np.dtype("<i4")}

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:\-]*")


class TensorIOError(ValueError):
    """A tensor directory or a tensor to be written is malformed; the message names the file (and line)."""


class PlantedFileError(TensorIOError):
    """A path read is a symbolic link, not a regular file (a FIFO, a socket, a device) or not a directory, or a
    file is larger than it may be: in a runner's output directory, something the candidate's code put there."""


_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # O_NONBLOCK: a FIFO does not block


def _kind(mode: int) -> str:
    return "a symbolic link" if stat.S_ISLNK(mode) else "a FIFO" if stat.S_ISFIFO(mode) else \
        "a socket" if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else \
        "a directory" if stat.S_ISDIR(mode) else "not a regular file"


def _open_dir(directory: Path, root: Path | None) -> int:
    """An fd of ``directory`` opened without following a link: every component below ``root`` (the whole path
    when ``root`` is None: its last component) must be a real directory.

    Raises:
        PlantedFileError: a link or a non-directory on the way; TensorIOError: a directory missing."""
    directory = Path(directory)
    start, parts = (directory, ()) if root is None else (Path(root), directory.relative_to(root).parts)
    try:
        fd = os.open(start, _OPEN_DIR)
    except OSError as e:
        raise _dir_error(start, e) from None
    for i, part in enumerate(parts):
        try:
            nxt = os.open(part, _OPEN_DIR, dir_fd=fd)
        except OSError as e:
            raise _dir_error(Path(root, *parts[:i + 1]), e) from None
        finally:
            os.close(fd)
        fd = nxt
    return fd


def _dir_error(path: Path, e: OSError) -> TensorIOError:
    if e.errno in (errno.ELOOP, errno.ENOTDIR):
        what = _kind(os.lstat(path).st_mode) if os.path.lexists(path) else "behind a link"
        return PlantedFileError(f"{path}: {what}, not a directory: refused")
    return TensorIOError(f"{path}: cannot open directory ({e.strerror})")


def _read_at(dir_fd: int, name: str, limit_bytes: int, where: Path, what: str = "", *,
             sized: bool = False) -> bytes | bytearray:
    """The first ``limit_bytes`` + 1 bytes (at most) of the regular file ``name`` in ``dir_fd`` (named ``where``
    in errors, ``what`` it holds): one byte more than it may hold, so that the caller sees a file too long
    without reading it all.  ``sized``: read into one writable buffer of ``limit_bytes`` + 1 bytes at most (the file's size
    + 1 when smaller), for a tensor of known size (numpy keeps the buffer as the array's: no second copy).

    Raises:
        PlantedFileError: a link or not a regular file; TensorIOError (with the errno's text): it cannot be
            read."""
    try:
        fd = os.open(name, _OPEN_FILE, dir_fd=dir_fd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENXIO):  # a link; a socket (ENXIO)
            mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
            raise PlantedFileError(f"{where}: {_kind(mode)}, not a regular file: refused") from None
        raise TensorIOError(f"{where}: cannot read {what}({e.strerror})") from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PlantedFileError(f"{where}: {_kind(st.st_mode)}, not a regular file: refused")
        if sized:
            # no more than the file holds (a manifest the runner's output directory holds may claim 2 GB for a
            # file of 16 bytes: allocated first, that cost the kit 2 GB and 6 s before the size check)
            return _read_into(fd, bytearray(min(limit_bytes, st.st_size) + 1))
        chunks, left = [], limit_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as e:
        raise TensorIOError(f"{where}: cannot read {what}({e.strerror})") from e
    finally:
        os.close(fd)
    return b"".join(chunks)


def _read_into(fd: int, buf: bytearray) -> bytearray:
    """``buf`` filled from ``fd`` up to its end or the file's, cut to what was read."""
    got = 0
    with memoryview(buf) as view:
        while got < len(buf):
            n = os.readv(fd, [view[got:got + (1 << 24)]])
            if not n:
                break
            got += n
    del buf[got:]
    return buf


def read_regular(path: Path, limit_bytes: int, root: Path | None = None, what: str = "") -> bytes:
    """The bytes of the regular file ``path``, at most ``limit_bytes``, no link followed: neither ``path`` nor,
    with ``root``, any directory between ``root`` and it may be a link.

    Raises:
        PlantedFileError: a link, a special file, or a file larger than ``limit_bytes``; TensorIOError: missing
            or unreadable."""
    path = Path(path)
    dfd = _open_dir(path.parent, root)
    try:
        data = _read_at(dfd, path.name, limit_bytes, path, what)
    finally:
        os.close(dfd)
    if len(data) > limit_bytes:
        raise PlantedFileError(f"{path}: more than the {limit_bytes} bytes it may hold: refused")
    return data


def check_name(name: str) -> str:
    """Return ``name`` if it can be a tensor file name (letters, digits, ``_ . : -``; not starting with ``.``
    or ``-``); raise :class:`TensorIOError` otherwise."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise TensorIOError(
            f"tensor name {name!r} cannot be used as a file name (allowed: A-Z a-z 0-9 _ . : -)"
        )
    return name


def to_wire(name: str, array: np.ndarray) -> np.ndarray:
    """Convert ``array`` to a wire dtype: float32 stays, bool and integer kinds become int32.

    Raises:
        TensorIOError: a float dtype other than float32, an integer value outside the int32 range, or a
            non-numeric dtype.
    """
    a = np.asarray(array)
    if a.dtype == np.float32 or a.dtype == np.int32:
        return a
    if a.dtype == np.bool_ or np.issubdtype(a.dtype, np.integer):
        if a.size and np.issubdtype(a.dtype, np.integer):
            info = np.iinfo(np.int32)
            lo, hi = int(a.min()), int(a.max())
            if lo < info.min or hi > info.max:
                raise TensorIOError(f"tensor {name!r}: values [{lo}, {hi}] do not fit in int32")
        return a.astype(np.int32)
    raise TensorIOError(f"tensor {name!r}: dtype {a.dtype} has no wire form (float32, int32, int64, bool)")


def write_tensors(directory: Path, tensors: Mapping[str, np.ndarray]) -> Path:
    """Write ``tensors`` (name → float32 or int32 array, any shape incl. 0-d) to ``directory``.

    Creates the directory if needed; overwrites ``manifest.txt`` and the ``.bin`` files of the given names.
    Returns the manifest path.

    Raises:
        TensorIOError: a bad name, or a dtype other than float32/int32 (convert with :func:`to_wire` first).
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    lines = []
    for name, array in tensors.items():
        check_name(name)
        a = np.asarray(array)
        # any byte order: the data is written little-endian
        wire = next(
            (k for k, dt in WIRE_DTYPES.items() if (a.dtype.kind, a.dtype.itemsize) == (dt.kind, 4)), None
        )
        if wire is None:
            raise TensorIOError(f"tensor {name!r}: dtype {a.dtype} is not float32 or int32 (see to_wire)")
        (directory / f"{name}.bin").write_bytes(np.ascontiguousarray(a, dtype=WIRE_DTYPES[wire]).tobytes())
        lines.append(" ".join([name, wire, str(a.ndim), *(str(d) for d in a.shape)]))
    manifest = directory / MANIFEST
    manifest.write_text("".join(line + "\n" for line in lines))
    return manifest


def read_manifest(directory: Path, root: Path | None = None) -> list[tuple[str, str, tuple[int, ...]]]:
    """Parse ``directory/manifest.txt`` (at most :data:`MAX_MANIFEST_BYTES`, no link followed: neither it nor,
    with ``root``, a directory between ``root`` and it) into ``[(name, dtype, shape), ...]`` in file order.

    Raises:
        TensorIOError: missing file, or a malformed line (the message gives ``path:line``); PlantedFileError (a
            TensorIOError): a link, a special file, or a manifest too large.
    """
    path = Path(directory) / MANIFEST
    return _parse_manifest(path, read_regular(path, MAX_MANIFEST_BYTES, root, "manifest "))


def _parse_manifest(path: Path, raw: bytes) -> list[tuple[str, str, tuple[int, ...]]]:
    if len(raw) > MAX_MANIFEST_BYTES:
        raise PlantedFileError(f"{path}: more than the {MAX_MANIFEST_BYTES} bytes a manifest may hold: refused")
    try:
        text = raw.decode()
    except UnicodeDecodeError as e:
        raise TensorIOError(f"{path}: not UTF-8 ({e.reason} at byte {e.start})") from None
    entries: list[tuple[str, str, tuple[int, ...]]] = []
    seen: set[str] = set()
    for lineno, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        where = f"{path}:{lineno}"
        if len(fields) < 3:
            raise TensorIOError(f"{where}: expected 'name dtype ndim dims...', got {line!r}")
        name, dtype, ndim_text, *dims_text = fields
        try:
            check_name(name)
        except TensorIOError as e:
            raise TensorIOError(f"{where}: {e}") from None
        if name in seen:
            raise TensorIOError(f"{where}: tensor {name!r} listed twice")
        if dtype not in WIRE_DTYPES:
            raise TensorIOError(f"{where}: dtype {dtype!r} is not one of {sorted(WIRE_DTYPES)}")
        try:
            ndim = int(ndim_text)
            dims = tuple(int(d) for d in dims_text)
        except ValueError:
            raise TensorIOError(f"{where}: ndim and dims must be integers, got {line!r}") from None
        if ndim < 0 or len(dims) != ndim:
            raise TensorIOError(f"{where}: ndim {ndim_text} but {len(dims)} dims given")
        if any(d < 0 for d in dims):
            raise TensorIOError(f"{where}: negative dimension in {list(dims)}")
        seen.add(name)
        entries.append((name, dtype, dims))
    return entries


def read_tensors(directory: Path, root: Path | None = None) -> dict[str, np.ndarray]:
    """Read every tensor listed in ``directory/manifest.txt`` (name → float32/int32 array, manifest order), no
    link followed (neither a file nor, with ``root``, a directory between ``root`` and ``directory``), no file
    read beyond the size its manifest line gives it.

    Raises:
        TensorIOError: a malformed manifest, a missing ``.bin`` file, or a file whose size does not match the
            manifest's shape; PlantedFileError (a TensorIOError): a link or a special file in the way, a file
            larger than its shape, a shape above :data:`MAX_TENSOR_BYTES`.
    """
    directory = Path(directory)
    dfd = _open_dir(directory, root)
    try:
        manifest = directory / MANIFEST
        entries = _parse_manifest(manifest, _read_at(dfd, MANIFEST, MAX_MANIFEST_BYTES, manifest, "manifest "))
        result: dict[str, np.ndarray] = {}
        for name, dtype, shape in entries:
            path = directory / f"{name}.bin"
            wire = WIRE_DTYPES[dtype]
            expected = wire.itemsize
            for d in shape:  # Python ints: a product of huge dims does not wrap as an int64 would
                expected *= d
            if expected > MAX_TENSOR_BYTES:
                raise PlantedFileError(f"{manifest}: tensor {name!r} of shape {list(shape)} needs {expected} bytes, "
                                       f"more than any tensor holds ({MAX_TENSOR_BYTES}): refused")
            data = _read_at(dfd, f"{name}.bin", expected, path, "tensor data ", sized=True)
            if len(data) != expected:
                got = f"{len(data)} bytes" if len(data) <= expected else "more bytes"
                raise TensorIOError(f"{path}: {got}, manifest shape {list(shape)} {dtype} needs {expected}")
            # the array keeps the buffer read into (writable): a copy only on a big-endian host; a 4 MB tensor's
            # second copy (into fresh pages) was ~3 ms of every timing run's reading of its outputs
            result[name] = np.frombuffer(data, dtype=wire).astype(wire.newbyteorder("="), copy=False).reshape(shape)
        return result
    finally:
        os.close(dfd)
