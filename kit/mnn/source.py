"""Find or fetch the pinned MNN tree and keep a private pristine copy of it in the cache.

The user's ``mnn.source_dir`` is never modified: it is copied once into
``<cache>/trees/<engine>-<version>-<digest16>/src`` (the *pristine* tree), from which every workspace is
hard-linked.  Without ``source_dir`` the pinned release tarball is downloaded, checked and unpacked there.
A tree is identified by :func:`tree_digest`, a content hash that does not depend on where it lies.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kit.suite.tasks import sha256_file


class SourcePin(Protocol):
    """What :func:`ensure_pristine` reads of the pinned tree (the ``[mnn]`` section,
    :class:`kit.settings.sections.MnnSection`, is one): the engine, the MNN version and its tree's digest, where the
    tree is (``source_dir``; None: download ``tarball_url``, checked against ``tarball_sha256``), whether to check the
    tree (``check_tree``) and the cache it is copied into (``cache_dir``)."""

    engine: str
    version: str
    source_dir: Path | None
    tarball_url: str
    tarball_sha256: str | None
    tree_sha256: str
    check_tree: bool
    cache_dir: Path

#: top-level folders left out of the digest (demo apps; three iOS assets are missing from some mirrors)
DIGEST_EXCLUDE = ("apps", ".git")


class SourceError(Exception):
    """The MNN tree cannot be found, fetched or verified; the message says what to set.  The configured input
    is refused: a run ends before any job, and records none (:attr:`records_jobs`)."""

    #: whether a run whose setup raised this gives its jobs ``harness_error`` records (kit.job.record)
    records_jobs = False


class CacheError(SourceError):
    """The kit's cache folder cannot be written (read-only, a file in the way): this machine's setup failed,
    so the run's jobs are recorded as ``harness_error`` and retried once it is fixed."""

    records_jobs = True


@dataclass(frozen=True)
class Pristine:
    """A verified, private copy of the tree.

    ``root``: the tree; ``digest``: :func:`tree_digest` of it; ``manifest``: relpath → (size, mtime_ns, inode)
    taken when the copy was made (used to detect writes through hard links).
    """

    root: Path
    digest: str
    engine: str
    version: str

    @property
    def manifest_path(self) -> Path:
        return self.root.parent / "manifest.json"

    def manifest(self) -> dict[str, list[int]]:
        """relpath → [size, mtime_ns, inode] (read once per process: the pristine tree never changes)."""
        return _read_manifest(self.manifest_path)


@functools.lru_cache(maxsize=8)
def _read_manifest(path: Path) -> dict[str, list[int]]:
    return json.loads(path.read_text())


def iter_files(root: Path, exclude_top: tuple[str, ...] = ()) -> list[str]:
    """Relative POSIX paths of every file and symlink below ``root`` (sorted)."""
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d not in exclude_top]
            rel_dir = ""
        # symlinks to directories appear in dirnames; treat them as files (not followed)
        for d in list(dirnames):
            if os.path.islink(os.path.join(dirpath, d)):
                dirnames.remove(d)
                filenames.append(d)
        for f in filenames:
            out.append(f"{rel_dir}/{f}" if rel_dir else f)
    out.sort()
    return out


def file_sha256(path: Path) -> str:
    """sha256 of a file's content, or of ``link:<target>`` for a symlink (never followed)."""
    if path.is_symlink():
        return hashlib.sha256(b"link:" + os.readlink(path).encode()).hexdigest()
    return sha256_file(path)


def tree_digest(root: Path) -> str:
    """sha256 (hex) over the sorted lines ``relpath\\0sha256(content)\\n`` of every file of ``root``.

    Top-level ``apps/`` and ``.git/`` are excluded; a symlink contributes its target string.
    """
    h = hashlib.sha256()
    for rel in iter_files(root, DIGEST_EXCLUDE):
        h.update(rel.encode() + b"\0" + file_sha256(root / rel).encode() + b"\n")
    return h.hexdigest()


def _stamp(path: Path) -> dict[str, list[int]]:
    manifest: dict[str, list[int]] = {}
    for rel in iter_files(path):
        st = os.lstat(path / rel)
        manifest[rel] = [st.st_size, st.st_mtime_ns, st.st_ino]
    return manifest


def _download(url: str, dest: Path, sha256: str | None) -> None:
    try:
        with urllib.request.urlopen(url, timeout=60) as resp, open(dest, "wb") as f:
            shutil.copyfileobj(resp, f)
    except (urllib.error.URLError, OSError) as exc:
        raise SourceError(
            f"cannot download the MNN source tarball from {url} ({exc}). Without network access, point the kit "
            "at an MNN tree: set mnn.source_dir in the config or MKB_MNN__SOURCE_DIR=/path/to/MNN"
        ) from exc
    if sha256 is not None:
        got = file_sha256(dest)
        if got != sha256:
            raise SourceError(f"{url}: sha256 {got} differs from mnn.tarball_sha256 {sha256}; refusing it")


def _unpack(tarball: Path, dest: Path) -> None:
    dest.mkdir(parents=True)
    with tarfile.open(tarball) as tf:
        members = tf.getmembers()
        top = {m.name.split("/", 1)[0] for m in members}
        strip = len(top) == 1
        for m in members:
            if strip:
                parts = m.name.split("/", 1)
                if len(parts) == 1:
                    continue
                m.name = parts[1]
        tf.extractall(dest, members=[m for m in members if m.name and not m.name.startswith("/")], filter="data")


def ensure_pristine(mnn: SourcePin) -> Pristine:
    """Return the verified pristine copy of the tree ``mnn`` (the config's ``[mnn]``) names, creating it on
    first use.

    Raises:
        SourceError: source_dir missing or not an MNN tree, digest mismatch (``mnn.check_tree``), or no
            source_dir and the tarball cannot be downloaded.
    """
    trees = mnn.cache_dir / "trees"
    try:
        trees.mkdir(parents=True, exist_ok=True)
        lock_file = open(trees / "lock", "w")  # noqa: SIM115 (closed by the with below)
    except OSError as exc:  # a read-only or foreign cache folder: a traceback said only "[Errno 30] ..."
        raise CacheError(f"mnn.cache_dir: cannot write {exc.filename or trees}: {exc.strerror}; make "
                          f"{mnn.cache_dir} a writable folder or point mnn.cache_dir (MKB_MNN__CACHE_DIR) "
                          f"elsewhere") from exc
    # one process at a time per cache: two workers starting on a fresh cache would otherwise both copy the
    # tree, and the second would replace the copy the first is already hard-linking its workspace from
    with lock_file as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _ensure_pristine_locked(mnn, trees)


def _ensure_pristine_locked(m: SourcePin, trees: Path) -> Pristine:
    check = m.check_tree and m.engine == "mnn"

    if m.source_dir is not None:
        src = m.source_dir.expanduser().resolve()
        if not src.is_dir():
            raise SourceError(f"mnn.source_dir: {src} is not a directory")
        if not (src / "CMakeLists.txt").is_file() or not (src / "source").is_dir():
            raise SourceError(f"mnn.source_dir: {src} does not look like an MNN tree (no CMakeLists.txt or source/)")
        key_file = trees / "by-path.json"
        known = json.loads(key_file.read_text()) if key_file.is_file() else {}
        fingerprint = _dir_fingerprint(src)  # one walk of the tree (~0.3 s for MNN), for the check and the cache
        digest = _cached_digest(src, known, fingerprint)
        if check and digest != m.tree_sha256:
            raise SourceError(
                f"mnn.source_dir: {src} has content digest {digest}, not the pinned MNN {m.version} "
                f"({m.tree_sha256}). Point it at an unmodified {m.version} tree, or set mnn.check_tree = false."
            )
        known[str(src)] = fingerprint | {"digest": digest}
        _atomic_write(key_file, json.dumps(known, indent=1))
        if m.engine == "fixture":  # the copy holds the kit's runner headers too: its digest is the copy's own
            return _materialize(trees, m.engine, m.version, None, lambda dest: copy_fixture_tree(src, dest))
        return _materialize(trees, m.engine, m.version, digest, lambda dest: _copy_tree(src, dest))

    if m.engine != "mnn":
        raise SourceError("mnn.source_dir must be set for the fixture engine")
    expected = m.tree_sha256
    existing = trees / f"{m.engine}-{m.version}-{expected[:16]}"
    if (existing / "manifest.json").is_file():
        return Pristine(existing / "src", expected, m.engine, m.version)

    def fetch(dest: Path) -> None:
        with tempfile.TemporaryDirectory(dir=trees) as tmp:
            tarball = Path(tmp) / "mnn.tar.gz"
            _download(m.tarball_url, tarball, m.tarball_sha256)
            _unpack(tarball, dest)

    pristine = _materialize(trees, m.engine, m.version, None, fetch)
    if check and pristine.digest != expected:
        raise SourceError(f"{m.tarball_url}: unpacked tree digest {pristine.digest} differs from mnn.tree_sha256 {expected}")
    return pristine


def _dir_fingerprint(src: Path) -> dict[str, int]:
    """Cheap change detector for a source dir: count and newest mtime of its files."""
    count, newest = 0, 0
    for rel in iter_files(src, DIGEST_EXCLUDE):
        st = os.lstat(src / rel)
        count += 1
        newest = max(newest, st.st_mtime_ns)
    return {"count": count, "newest_mtime_ns": newest}


def _cached_digest(src: Path, known: dict, fingerprint: dict[str, int]) -> str:
    entry = known.get(str(src))
    if entry and {k: entry.get(k) for k in ("count", "newest_mtime_ns")} == fingerprint:
        return entry["digest"]
    return tree_digest(src)


def _copy_tree(src: Path, dest: Path) -> None:
    shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns(".git"))


#: the kit's runner headers (kit/mnn/runner/) that the fixture engine's runner includes too, one source for both:
#: its tree does not hold them, every copy of it gets them in tools/runner/
FIXTURE_RUNNER_HEADERS = ("mkb_lockdown.hpp",)


def copy_fixture_tree(src: Path | None, dest: Path) -> None:
    """Copy the fixture engine's tree ``src`` to ``dest`` (``None``: only add to ``dest``, a copy made already)
    and put the kit's :data:`FIXTURE_RUNNER_HEADERS` beside its runner (``tools/runner/mkb_runner.cpp``; a tree
    without one gets nothing), replacing any there."""
    if src is not None:
        _copy_tree(src, dest)
    runner_dir, into = Path(__file__).with_name("runner"), dest / "tools" / "runner"
    if (into / "mkb_runner.cpp").is_file():
        for name in FIXTURE_RUNNER_HEADERS:
            shutil.copyfile(runner_dir / name, into / name)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _materialize(trees: Path, engine: str, version: str, digest: str | None, fill) -> Pristine:
    if digest is not None:
        final = trees / f"{engine}-{version}-{digest[:16]}"
        if (final / "manifest.json").is_file():
            return Pristine(final / "src", digest, engine, version)
    staging = Path(tempfile.mkdtemp(prefix="staging-", dir=trees))
    try:
        fill(staging / "src")
        real = tree_digest(staging / "src")
        if digest is not None and real != digest:
            raise SourceError(f"the tree changed while it was copied (digest {real} != {digest}); try again")
        final = trees / f"{engine}-{version}-{real[:16]}"
        if (final / "manifest.json").is_file():
            return Pristine(final / "src", real, engine, version)
        _atomic_write(staging / "manifest.json", json.dumps(_stamp(staging / "src")))
        (staging / "digest").write_text(real)
        if final.exists():
            shutil.rmtree(final)
        os.replace(staging, final)
        return Pristine(final / "src", real, engine, version)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
