"""Hot-swap a candidate's files into a workspace and register new ops; restore afterwards.

* A replaced file keeps its name: it is unlinked (never written through the hard link) and rewritten;
  ninja rebuilds it.
* A new file needs a CMake re-configure (MNN collects sources with ``FILE(GLOB)`` at configure time).
* When the candidate's ``REGISTER_*`` lines differ from the original's (a renamed creator, a new op), the
  tree's own generator ``tools/script/register.py <root>`` is rerun; generated files whose content did not
  change keep their old mtime so nothing is rebuilt for nothing.
* :func:`restore` puts everything back, always (callers use it in ``finally``); a job killed before it ran
  is repaired by :meth:`Workspace.check_and_repair` before the next job.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from kit.host import proc
from kit.mnn.workspace import GENERATED_FILES, Workspace
from kit.suite.tasks import Task

_REGISTER_LINE = re.compile(r"^\s*(REGISTER_[A-Z0-9_]+\s*\(.*)$", re.MULTILINE)


class RegisterError(Exception):
    """Registration generation failed (message holds the generator's output)."""


class PlacementError(Exception):
    """The candidate's files cannot go into the tree as they are (nothing was written).

    ``reason`` is :attr:`OVERWRITES` (a new file would replace an existing MNN file the task does not list as
    replaceable) or :attr:`DROPS_REGISTRATION` (a replaced file no longer registers an op type the original
    registers: MNN would silently lose that op); the message names the file."""

    OVERWRITES = "overwrites"
    DROPS_REGISTRATION = "drops_registration"

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class Swap:
    """What :func:`apply` changed: MNN-relative paths replaced and added, and whether it re-registered."""

    replaced: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    reregistered: bool = False
    register_s: float = 0.0


def _register_lines(text: str) -> list[str]:
    return sorted(" ".join(m.split()) for m in _REGISTER_LINE.findall(text))


_CPU_REG = re.compile(r"REGISTER_CPU_OP_CREATOR\s*\(\s*\w+\s*,\s*(OpType_\w+)\s*\)")
_OPTYPE = re.compile(r"\bOpType_\w+\b")


def _registered_op_types(text: str) -> set[str]:
    """Op types a file registers: the OpType of every REGISTER_CPU_OP_CREATOR line, or, for geometry and
    converter files (registered inside functions), every ``OpType_X`` the file names."""
    cpu = set(_CPU_REG.findall(text))
    return cpu if cpu else set(_OPTYPE.findall(text)) if "REGISTER_" in text else set()


def check_placement(ws: Workspace, task: Task, files: Mapping[str, str]) -> list[tuple[str, str]]:
    """(MNN-relative path, text) for every file, after the checks that need the tree.

    Raises:
        ValueError: a name the task does not allow (a harness bug: candidates are checked before).
        PlacementError: a *new* file would overwrite an existing MNN file that the task does not list as
            replaceable, or a replaced file drops an op type that the original registers.
    """
    placed = []
    for name in sorted(files):
        rel = task.place(name)
        if rel is None:
            raise ValueError(f"{name}: not allowed for task {task.id}")
        if rel not in task.mnn.files and (ws.pristine.root / rel).exists():
            raise PlacementError(
                PlacementError.OVERWRITES,
                f"{name}: a new file may not replace the existing MNN file {rel} (replaceable: {task.mnn.files})",
            )
        placed.append((rel, files[name]))
    new_types: set[str] = set()
    for _, text in placed:
        new_types |= _registered_op_types(text)
    for rel, _ in placed:
        orig = ws.pristine.root / rel
        if orig.is_file():
            lost = _registered_op_types(orig.read_text(encoding="utf-8", errors="replace")) - new_types
            if lost:
                raise PlacementError(
                    PlacementError.DROPS_REGISTRATION,
                    f"{rel}: the candidate no longer registers {sorted(lost)}, which the original file registers "
                    "(MNN would silently lose these ops)",
                )
    return placed


def apply(ws: Workspace, task: Task, files: Mapping[str, str], timeout_s: float = 60.0) -> Swap:
    """Write ``files`` (basename → text) into ``ws.src`` where ``task`` allows them.

    The caller has already checked every name against the task's allowlist (:meth:`Task.place`).

    Raises:
        ValueError, PlacementError: see :func:`check_placement` (nothing is written then).
        RegisterError: the registration generator failed.
    """
    swap = Swap()
    placed = check_placement(ws, task, files)
    # record intent first: a kill in the middle leaves enough for check_and_repair to find
    ws.set_state(dirty=[rel for rel, _ in placed])
    need_register = False
    for rel, text in placed:
        dest = ws.src / rel
        existed = dest.exists() or dest.is_symlink()
        old_lines = _register_lines(dest.read_text(encoding="utf-8", errors="replace")) if existed else []
        if existed:
            dest.unlink()
            swap.replaced.append(rel)
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            swap.added.append(rel)
        dest.write_text(text, encoding="utf-8")
        if _register_lines(text) != old_lines:
            need_register = True
    if swap.added:
        ws.set_state(needs_configure=True)
    if need_register:
        _run_generator(ws, timeout_s, swap)
    return swap


def _run_generator(ws: Workspace, timeout_s: float, swap: Swap) -> None:
    script = ws.src / "tools" / "script" / "register.py"
    if not script.is_file():
        raise RegisterError(f"{script}: registration generator missing")
    before = {}
    for rel in GENERATED_FILES:
        p = ws.src / rel
        if p.is_file():
            st = p.stat()
            before[rel] = (p.read_bytes(), st.st_atime_ns, st.st_mtime_ns)
    res = proc.run([sys.executable, script, ws.src], cwd=ws.src, timeout_s=timeout_s)
    swap.reregistered = True
    swap.register_s = res.wall_s
    if not res.ok:
        raise RegisterError(f"tools/script/register.py failed (exit {res.returncode}):\n{res.output[-4000:]}")
    for rel, (content, atime, mtime) in before.items():
        p = ws.src / rel
        if p.is_file() and p.read_bytes() == content:
            os.utime(p, ns=(atime, mtime))


def restore(ws: Workspace, swap: Swap) -> None:
    """Undo :func:`apply`: replaced files get their pristine content back as fresh copies, added files are
    removed (and a re-configure is scheduled), regenerated registration files are restored."""
    for rel in swap.replaced:
        ws.restore_file(rel)
    for rel in swap.added:
        p = ws.src / rel
        if p.exists() or p.is_symlink():
            p.unlink()
    if swap.reregistered:
        for rel in GENERATED_FILES:
            cur, ref = ws.src / rel, ws.pristine.root / rel
            if ref.is_file() and (not cur.is_file() or cur.read_bytes() != ref.read_bytes()):
                ws.restore_file(rel)
    if swap.added:
        ws.set_state(needs_configure=True)
    ws.set_state(dirty=[])
