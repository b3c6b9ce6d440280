"""Raw tensor directories: the exchange format between the kit and a runner (``mkb_runner`` or the fixture engine).

A directory holds ``manifest.txt`` with one line per tensor, ``name dtype ndim d0 d1 ...`` (dtype ``float32`` or
``int32``), and ``<name>.bin`` per tensor with its data as raw little-endian C-order bytes.  The manifest order is
meaningful (it is the order of the model's inputs or outputs).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np

MANIFEST = "manifest.txt"

#: wire dtype name → little-endian numpy dtype
WIRE_DTYPES: dict[str, np.dtype] = {"float32": np.dtype("<f4"), "int32": np.dtype("<i4")}

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:\-]*")


class TensorIOError(ValueError):
    """A tensor directory or a tensor to be written is malformed; the message names the file (and line)."""


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


def read_manifest(directory: Path) -> list[tuple[str, str, tuple[int, ...]]]:
    """Parse ``directory/manifest.txt`` into ``[(name, dtype, shape), ...]`` in file order.

    Raises:
        TensorIOError: missing file, or a malformed line (the message gives ``path:line``).
    """
    path = Path(directory) / MANIFEST
    try:
        text = path.read_text()
    except OSError as e:
        raise TensorIOError(f"{path}: cannot read manifest ({e.strerror})") from e
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


def read_tensors(directory: Path) -> dict[str, np.ndarray]:
    """Read every tensor listed in ``directory/manifest.txt`` (name → float32/int32 array, manifest order).

    Raises:
        TensorIOError: a malformed manifest, a missing ``.bin`` file, or a file whose size does not match the
            manifest's shape.
    """
    directory = Path(directory)
    result: dict[str, np.ndarray] = {}
    for name, dtype, shape in read_manifest(directory):
        path = directory / f"{name}.bin"
        try:
            data = path.read_bytes()
        except OSError as e:
            raise TensorIOError(f"{path}: cannot read tensor data ({e.strerror})") from e
        wire = WIRE_DTYPES[dtype]
        expected = int(np.prod(shape, dtype=np.int64)) * wire.itemsize
        if len(data) != expected:
            raise TensorIOError(
                f"{path}: {len(data)} bytes, manifest shape {list(shape)} {dtype} needs {expected}"
            )
        result[name] = (
            np.frombuffer(data, dtype=wire).astype(wire.newbyteorder("="), copy=True).reshape(shape)
        )
    return result
