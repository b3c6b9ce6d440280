"""Per-worker MNN workspaces: a hard-linked copy of the pristine tree plus a build directory.

A worker owns its workspace for its life (an exclusive ``flock`` on ``<ws>/lock``), so a job never shares a
build tree with another running job, even across processes.  Files are hard links into the pristine tree
until a job replaces them; the kit never writes through a link (it unlinks first), and
:meth:`Workspace.check_and_repair` — run before every job — finds any file that differs from the pristine
tree (left by a killed job, say) and restores it as a fresh copy, so ninja sees a newer source and
rebuilds the object.
"""

from __future__ import annotations

import fcntl
import filecmp
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from kit.mnn.source import Pristine, iter_files

#: files that MNN's registration generator (tools/script/register.py) rewrites in place: always real copies
GENERATED_FILES = (
    "source/backend/cpu/CPUOPRegister.cpp",
    "source/shape/ShapeRegister.cpp",
    "source/geometry/GeometryOPRegister.cpp",
    "source/backend/opencl/core/OpenCLOPRegister.cpp",
    "source/backend/coreml/backend/CoreMLOPRegister.cpp",
    "source/backend/nnapi/backend/NNAPIOPRegister.cpp",
)


class WorkspaceError(Exception):
    """The workspace or the pristine tree behind it is damaged beyond repair."""


@dataclass
class Workspace:
    """One worker's tree (``src``) and build directory (``build``) under ``root``."""

    root: Path
    pristine: Pristine
    _lock_fd: int | None = field(default=None, repr=False)
    #: when the last build in this workspace ended (``time.time_ns()``; None: none in this process)
    built_ns: int | None = field(default=None, repr=False)
    #: the worker's set-up checked the sources equal to the pristine tree's and no job ran since: the first job
    #: does not check them again (:func:`kit.stages.build.candidate_in`)
    checked_at_setup: bool = field(default=False, repr=False)

    @property
    def src(self) -> Path:
        return self.root / "src"

    @property
    def build(self) -> Path:
        return self.root / "build"

    @property
    def state_path(self) -> Path:
        return self.root / "state.json"

    # -- state shared by register/build (survives a killed job) ----------------------------------
    def state(self) -> dict:
        if self.state_path.is_file():
            try:
                return json.loads(self.state_path.read_text())
            except json.JSONDecodeError:
                pass
        return {"needs_configure": True, "dirty": []}

    def set_state(self, **kw: object) -> None:
        st = self.state() | kw
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(st))
        os.replace(tmp, self.state_path)

    # -- lifecycle ---------------------------------------------------------------------------------
    def release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _populate(self) -> None:
        """Hard-link every pristine file into ``src`` (generated registration files are copied)."""
        tmp = self.root / "src.partial"
        if tmp.exists():
            shutil.rmtree(tmp)
        copies = set(GENERATED_FILES)
        for rel in iter_files(self.pristine.root):
            s, d = self.pristine.root / rel, tmp / rel
            d.parent.mkdir(parents=True, exist_ok=True)
            if s.is_symlink():
                os.symlink(os.readlink(s), d)
            elif rel in copies:
                shutil.copy2(s, d)
            else:
                os.link(s, d)
        os.replace(tmp, self.src)
        self.set_state(needs_configure=True, dirty=[])

    def restore_file(self, rel: str) -> None:
        """Put the pristine content of ``rel`` back as a fresh copy (new mtime: ninja rebuilds it)."""
        dest = self.src / rel
        if dest.is_symlink() or dest.exists():
            dest.unlink()
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.pristine.root / rel, dest)

    def remove_written_since_build(self) -> list[str]:
        """Delete the files of ``build`` written after the last build ended (:attr:`built_ns`: nothing the kit
        runs afterwards writes there, so such a file is something a run left) and return their paths relative
        to ``build``; the next build remakes any of its own outputs among them.  Nothing without a build.
        (~870 files for MNN: a few ms.)"""
        if self.built_ns is None or not self.build.is_dir():
            return []
        found = []
        for dirpath, _, names in os.walk(self.build):
            for name in names:
                path = os.path.join(dirpath, name)
                try:
                    if os.lstat(path).st_mtime_ns > self.built_ns:
                        os.unlink(path)
                        found.append(os.path.relpath(path, self.build))
                except OSError:
                    continue
        return sorted(found)

    def check_and_repair(self) -> list[str]:
        """Make ``src`` equal to the pristine tree; return the relative paths repaired.

        Extra files are deleted (and a CMake re-configure is scheduled), changed or missing files are
        restored as fresh copies.

        Raises:
            WorkspaceError: a pristine file changed after the pristine copy was made (written through a
                hard link); the cache tree must be recreated.
        """
        manifest = self.pristine.manifest()
        repaired: list[str] = []
        present = set()
        src_dir = str(self.src)  # plain strings in the loop: ~6,900 files
        for rel in iter_files(self.src):
            present.add(rel)
            ref = manifest.get(rel)
            if ref is None:
                os.unlink(os.path.join(src_dir, rel))
                repaired.append(rel)
                continue
            st = os.lstat(os.path.join(src_dir, rel))
            if st.st_ino == ref[2]:
                if st.st_size != ref[0] or st.st_mtime_ns != ref[1]:
                    raise WorkspaceError(
                        f"pristine file {self.pristine.root / rel} was modified through a hard link; delete "
                        f"{self.pristine.root.parent} to recreate the cached tree"
                    )
                continue
            path, src = self.src / rel, self.pristine.root / rel
            if path.is_symlink() or src.is_symlink():
                if not (path.is_symlink() and src.is_symlink() and os.readlink(path) == os.readlink(src)):
                    path.unlink()
                    os.symlink(os.readlink(src), path)
                    repaired.append(rel)
                continue
            if st.st_size != ref[0] or not filecmp.cmp(path, src, shallow=False):
                self.restore_file(rel)
                repaired.append(rel)
        for rel in manifest:
            if rel not in present:
                self.restore_file(rel)
                repaired.append(rel)
        added_or_removed = any(r not in manifest or r not in present for r in repaired)
        self.set_state(dirty=[], needs_configure=self.state().get("needs_configure", True) or added_or_removed)
        return repaired


def open_workspace(base: Path, pristine: Pristine, index: int | None = None) -> Workspace:
    """Lock and return a workspace under ``base`` (``w0``, ``w1``, ...), creating it if needed.

    With ``index`` given, that workspace is locked (waiting while another process holds it); otherwise the
    first free one is taken.
    """
    base.mkdir(parents=True, exist_ok=True)
    candidates = [index] if index is not None else range(0, 1024)
    for i in candidates:
        root = base / f"w{i}"
        root.mkdir(exist_ok=True)
        fd = os.open(root / "lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if index is not None else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            continue
        ws = Workspace(root, pristine, fd)
        if not ws.src.is_dir():
            ws._populate()
        return ws
    raise WorkspaceError(f"no free workspace under {base}")
