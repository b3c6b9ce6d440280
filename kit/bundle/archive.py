"""Writing a bundle folder as one archive and reading it back safely (stdlib ``tarfile`` and ``zipfile``).

``.zip`` is written as zip (deflated), anything else as gzip-compressed tar; members in sorted order, each
under :data:`~kit.bundle.manifest.ROOT`.  A bundle comes from someone else, so extraction refuses, naming the
member: absolute paths, ``..``, anything outside the top folder, links and special files, and archives whose
members add up to more than :data:`MAX_BYTES`.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

from kit.bundle.manifest import ROOT, BundleError

#: the largest uncompressed bundle read (bytes): the 190 built-in tasks, their candidates and records are ~10 MB
MAX_BYTES = 4 << 30


def write_archive(folder: Path, out: Path) -> Path:
    """Write every file under ``folder`` to ``out`` (``.zip``: zip, else ``.tar.gz``) as ``ROOT/<path>``,
    through a temporary file renamed into place; returns ``out``."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    if out.suffix == ".zip":
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for p in files:
                zf.write(p, f"{ROOT}/{p.relative_to(folder).as_posix()}")
    else:
        with tarfile.open(tmp, "w:gz") as tf:
            for p in files:
                info = tf.gettarinfo(str(p), f"{ROOT}/{p.relative_to(folder).as_posix()}")
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                with p.open("rb") as f:
                    tf.addfile(info, f)
    os.replace(tmp, out)
    return out


def _member_path(name: str, archive: Path) -> PurePosixPath:
    """The path of member ``name`` inside :data:`ROOT`.

    Raises:
        BundleError: absolute, with ``..``, or outside :data:`ROOT`."""
    p = PurePosixPath(name)
    if p.is_absolute() or ".." in p.parts or not p.parts or p.parts[0] != ROOT:
        raise BundleError(f"{archive}: member {name!r} lies outside {ROOT}/ (refused)")
    return PurePosixPath(*p.parts[1:]) if len(p.parts) > 1 else PurePosixPath(".")


def extract(archive: Path, dest: Path) -> Path:
    """Extract bundle ``archive`` into ``dest`` (created; emptied first if it exists) and return the bundle's
    root, ``dest/ROOT``.

    Raises:
        BundleError: not a file, not a tar or zip archive, or a member refused (module docstring)."""
    if not archive.is_file():
        raise BundleError(f"{archive}: no such bundle file")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    if zipfile.is_zipfile(archive):
        _extract_zip(archive, dest)
    elif tarfile.is_tarfile(archive):
        _extract_tar(archive, dest)
    else:
        raise BundleError(f"{archive}: neither a tar nor a zip archive")
    root = dest / ROOT
    if not root.is_dir():
        raise BundleError(f"{archive}: no {ROOT}/ folder inside")
    return root


def _extract_zip(archive: Path, dest: Path) -> None:
    with zipfile.ZipFile(archive) as zf:
        infos = zf.infolist()
        if sum(i.file_size for i in infos) > MAX_BYTES:
            raise BundleError(f"{archive}: more than {MAX_BYTES >> 30} GiB uncompressed (refused)")
        for info in infos:
            rel = _member_path(info.filename, archive)
            mode = info.external_attr >> 16
            if mode and (mode & 0o170000) not in (0o100000, 0o040000):  # a regular file or a folder
                raise BundleError(f"{archive}: member {info.filename!r} is a link or special file (refused)")
            if info.is_dir():
                continue
            target = dest / ROOT / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, target.open("wb") as dst:
                shutil.copyfileobj(src, dst)


def _extract_tar(archive: Path, dest: Path) -> None:
    try:
        with tarfile.open(archive, "r:*") as tf:
            members = tf.getmembers()
            if sum(m.size for m in members) > MAX_BYTES:
                raise BundleError(f"{archive}: more than {MAX_BYTES >> 30} GiB uncompressed (refused)")
            for m in members:
                rel = _member_path(m.name, archive)
                if m.isdir():
                    continue
                if not m.isfile():
                    raise BundleError(f"{archive}: member {m.name!r} is a link or special file (refused)")
                target = dest / ROOT / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                src = tf.extractfile(m)
                assert src is not None  # a regular file
                with src, target.open("wb") as dst:
                    shutil.copyfileobj(src, dst)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise BundleError(f"{archive}: damaged archive: {exc}") from exc
