"""Pristine copy, hard-linked workspaces, swap/restore and repair — on a small tree made here."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from conftest_fixture import FIXTURE_ROOT

from kit.mnn import register
from kit.mnn.runner_build import RUNNER_SOURCE
from kit.mnn.source import SourceError, ensure_pristine, tree_digest
from kit.mnn.workspace import WorkspaceError, open_workspace
from kit.settings.config import EvalConfig
from kit.suite.tasks import MnnTarget, Task, TensorSpec

REG_SCRIPT = '''
import os, re, sys
root = sys.argv[1]
cpu = os.path.join(root, "source", "backend", "cpu")
names = []
for f in sorted(os.listdir(cpu)):
    if f.endswith(".cpp") and f != "CPUOPRegister.cpp":
        for line in open(os.path.join(cpu, f)):
            m = re.match(r"\\s*REGISTER_CPU_OP_CREATOR\\((\\w+),\\s*(\\w+)\\)", line)
            if m:
                names.append(f"___{m[1]}__{m[2]}__")
with open(os.path.join(cpu, "CPUOPRegister.cpp"), "w") as out:
    out.write("// generated\\n" + "".join(f"extern void {n}();\\n" for n in names))
'''


def make_tree(root: Path) -> Path:
    cpu = root / "source" / "backend" / "cpu"
    cpu.mkdir(parents=True)
    (root / "CMakeLists.txt").write_text("project(fake)\n")
    (cpu / "CPUArgMax.cpp").write_text("REGISTER_CPU_OP_CREATOR(CPUArgMaxCreator, OpType_ArgMax)\n")
    (cpu / "CPUArgMax.hpp").write_text("// header\n")
    (root / "tools" / "script").mkdir(parents=True)
    (root / "tools" / "script" / "register.py").write_text(REG_SCRIPT)
    (root / "apps").mkdir()
    (root / "apps" / "demo.txt").write_text("demo")
    import subprocess
    import sys

    subprocess.run([sys.executable, root / "tools/script/register.py", root], check=True)
    return root


def task() -> Task:
    return Task(
        id="argmax_t",
        category="reduction",
        op_type="ArgMax",
        mechanism="atomic",
        split="test",
        mnn_op_types=["ArgMax"],
        inputs=[TensorSpec(name="x", shape=[4])],
        outputs=[TensorSpec(name="y", shape=[1], dtype="int64")],
        mnn=MnnTarget(
            files=["source/backend/cpu/CPUArgMax.hpp", "source/backend/cpu/CPUArgMax.cpp"],
            new_files=["source/backend/cpu/CPU*.cpp"],
        ),
    )


@pytest.fixture
def setup(tmp_path):
    src = make_tree(tmp_path / "mnn")
    cfg = EvalConfig(mnn={"source_dir": src, "cache_dir": tmp_path / "cache", "engine": "fixture"})
    pristine = ensure_pristine(cfg.mnn)
    ws = open_workspace(tmp_path / "cache" / "ws", pristine)
    yield src, pristine, ws
    ws.release()


def test_pristine_is_a_copy_with_same_digest(setup):
    src, pristine, ws = setup
    assert pristine.root != src
    assert tree_digest(pristine.root) == tree_digest(src) == pristine.digest
    # apps/ is excluded from the digest
    (src / "apps" / "demo.txt").write_text("changed")
    assert tree_digest(src) == pristine.digest


def test_the_fixture_engines_copy_gets_the_kits_runner_header(tmp_path):
    """The fixture engine's runner includes the kit's own lockdown header (one source): its tree does not hold it,
    the kit's copy of the tree gets it, and the copy's digest is the copy's own."""
    assert not (FIXTURE_ROOT / "tools/runner/mkb_lockdown.hpp").exists()
    cfg = EvalConfig(mnn={"source_dir": FIXTURE_ROOT, "cache_dir": tmp_path / "cache", "engine": "fixture"})
    pristine = ensure_pristine(cfg.mnn)
    header = pristine.root / "tools/runner/mkb_lockdown.hpp"
    assert header.read_bytes() == RUNNER_SOURCE.with_name("mkb_lockdown.hpp").read_bytes()
    assert tree_digest(pristine.root) == pristine.digest and ensure_pristine(cfg.mnn).root == pristine.root


def test_pinned_digest_is_enforced_for_mnn(tmp_path):
    src = make_tree(tmp_path / "mnn")
    cfg = EvalConfig(mnn={"source_dir": src, "cache_dir": tmp_path / "cache", "engine": "mnn"})
    with pytest.raises(SourceError, match="content digest"):
        ensure_pristine(cfg.mnn)


def test_missing_source_dir_is_named(tmp_path):
    cfg = EvalConfig(mnn={"source_dir": tmp_path / "nope", "cache_dir": tmp_path / "cache"})
    with pytest.raises(SourceError, match="mnn.source_dir"):
        ensure_pristine(cfg.mnn)


def test_an_unwritable_cache_dir_is_named(tmp_path):
    """A cache folder that cannot be written (here a file; read-only or foreign the same): SourceError naming
    mnn.cache_dir and what to do, not an OSError's traceback."""
    (tmp_path / "cache").write_text("")
    cfg = EvalConfig(mnn={"source_dir": make_tree(tmp_path / "mnn"), "cache_dir": tmp_path / "cache",
                          "engine": "fixture"})
    with pytest.raises(SourceError, match=r"mnn.cache_dir: cannot write .*cache/trees: .*writable folder"):
        ensure_pristine(cfg.mnn)


def test_pristine_copy_is_made_by_one_process_at_a_time(tmp_path):
    """Workers starting together on a fresh cache: a second ensure_pristine waits for the first (the cache's
    tree lock) instead of copying the tree beside it and replacing the copy the first one links from."""
    import fcntl
    import threading

    src = make_tree(tmp_path / "mnn")
    cfg = EvalConfig(mnn={"source_dir": src, "cache_dir": tmp_path / "cache", "engine": "fixture"})
    trees = tmp_path / "cache" / "trees"
    trees.mkdir(parents=True)
    result: list = []
    with open(trees / "lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another worker is materializing the tree
        t = threading.Thread(target=lambda: result.append(ensure_pristine(cfg.mnn)))
        t.start()
        t.join(timeout=2.0)
        assert t.is_alive() and result == []  # waiting for the lock
        assert not any(p.name.startswith("staging-") for p in trees.iterdir())  # and not copying meanwhile
    t.join(timeout=60)
    assert not t.is_alive() and tree_digest(result[0].root) == tree_digest(src)
    assert ensure_pristine(cfg.mnn).root == result[0].root  # the next one finds it


def test_workspace_files_are_hard_links_except_generated(setup):
    _, pristine, ws = setup
    a = ws.src / "source/backend/cpu/CPUArgMax.cpp"
    assert os.stat(a).st_ino == os.stat(pristine.root / "source/backend/cpu/CPUArgMax.cpp").st_ino
    gen = ws.src / "source/backend/cpu/CPUOPRegister.cpp"
    assert os.stat(gen).st_ino != os.stat(pristine.root / "source/backend/cpu/CPUOPRegister.cpp").st_ino


def test_swap_never_writes_through_links_and_restores(setup):
    _, pristine, ws = setup
    orig = (pristine.root / "source/backend/cpu/CPUArgMax.cpp").read_text()
    swap = register.apply(ws, task(), {"CPUArgMax.cpp": "REGISTER_CPU_OP_CREATOR(MyArgMax, OpType_ArgMax)\n// new\n"})
    assert swap.replaced == ["source/backend/cpu/CPUArgMax.cpp"] and swap.reregistered
    assert (pristine.root / "source/backend/cpu/CPUArgMax.cpp").read_text() == orig
    assert "___MyArgMax__OpType_ArgMax__" in (ws.src / "source/backend/cpu/CPUOPRegister.cpp").read_text()
    assert "MyArgMax" not in (pristine.root / "source/backend/cpu/CPUOPRegister.cpp").read_text()
    register.restore(ws, swap)
    assert (ws.src / "source/backend/cpu/CPUArgMax.cpp").read_text() == orig
    assert "MyArgMax" not in (ws.src / "source/backend/cpu/CPUOPRegister.cpp").read_text()
    assert ws.check_and_repair() == []


def test_restored_file_is_newer_than_before(setup):
    """ninja must rebuild a restored file: its mtime is fresh, not the pristine one."""
    _, pristine, ws = setup
    rel = "source/backend/cpu/CPUArgMax.hpp"
    before = os.stat(pristine.root / rel).st_mtime_ns
    time.sleep(0.01)
    swap = register.apply(ws, task(), {"CPUArgMax.hpp": "// candidate header\n"})
    assert not swap.reregistered  # no REGISTER line changed
    register.restore(ws, swap)
    assert os.stat(ws.src / rel).st_mtime_ns > before


def test_new_file_schedules_configure_and_is_removed(setup):
    _, _, ws = setup
    ws.set_state(needs_configure=False)
    swap = register.apply(ws, task(), {"CPUNewOp.cpp": "REGISTER_CPU_OP_CREATOR(NewOp, OpType_New)\n"})
    assert swap.added == ["source/backend/cpu/CPUNewOp.cpp"]
    assert ws.state()["needs_configure"] is True
    ws.set_state(needs_configure=False)
    register.restore(ws, swap)
    assert not (ws.src / "source/backend/cpu/CPUNewOp.cpp").exists()
    assert ws.state()["needs_configure"] is True


def test_killed_job_is_repaired(setup):
    """A job killed after the swap (no restore) leaves a dirty tree: check_and_repair fixes it."""
    _, pristine, ws = setup
    register.apply(ws, task(), {"CPUArgMax.cpp": "REGISTER_CPU_OP_CREATOR(Renamed, OpType_ArgMax) garbage",
                                "CPUExtra.cpp": "x"})
    (ws.src / "source/backend/cpu/CPUArgMax.hpp").unlink()
    repaired = ws.check_and_repair()
    assert set(repaired) == {
        "source/backend/cpu/CPUArgMax.cpp",
        "source/backend/cpu/CPUExtra.cpp",
        "source/backend/cpu/CPUArgMax.hpp",
        "source/backend/cpu/CPUOPRegister.cpp",  # regenerated: the creator was renamed
    }
    assert tree_digest(ws.src) == pristine.digest
    assert ws.state()["needs_configure"] is True


def test_write_through_link_is_detected(setup):
    _, pristine, ws = setup
    with open(ws.src / "source/backend/cpu/CPUArgMax.hpp", "a") as f:  # what the kit never does
        f.write("// oops\n")
    with pytest.raises(WorkspaceError, match="hard link"):
        ws.check_and_repair()


def test_workspaces_are_exclusive(setup, tmp_path):
    _, pristine, ws = setup
    other = open_workspace(tmp_path / "cache" / "ws", pristine)
    assert other.root != ws.root
    other.release()


def test_disallowed_name_is_a_harness_error(setup):
    _, _, ws = setup
    with pytest.raises(ValueError, match="not allowed"):
        register.apply(ws, task(), {"evil.cpp": "x"})


def test_dropping_a_registered_op_type_is_a_compile_error(setup):
    """A replaced file that no longer registers an op type the original registers would silently drop it
    (kit.mnn.register refuses it; the build stage names the status)."""
    from kit.results.outcomes import StageFailure
    from kit.results.records import ErrorKind, Status
    from kit.stages.build import candidate_in

    _, pristine, ws = setup
    orig = pristine.root / "source/backend/cpu/CPUArgMax.cpp"
    orig_text = orig.read_text()
    with pytest.raises(StageFailure) as ei, candidate_in(ws, task(), {"CPUArgMax.cpp": "REGISTER_CPU_OP_CREATOR(Other, OpType_Other)\n"}):
        pass
    assert ei.value.status == Status.COMPILE_ERROR and ei.value.kind == ErrorKind.MISSING_SYMBOL
    assert "OpType_ArgMax" in ei.value.message
    assert (ws.src / "source/backend/cpu/CPUArgMax.cpp").read_text() == orig_text  # nothing written
    # a renamed creator for the same op type is fine
    swap = register.apply(ws, task(), {"CPUArgMax.cpp": "REGISTER_CPU_OP_CREATOR(Renamed, OpType_ArgMax)\n"})
    register.restore(ws, swap)


def test_new_file_may_not_overwrite_an_existing_file(setup, tmp_path):
    from kit.results.outcomes import StageFailure
    from kit.results.records import Status
    from kit.stages.build import candidate_in

    _, _, ws = setup
    t = task().model_copy(update={"mnn": MnnTarget(files=["source/backend/cpu/CPUArgMax.cpp"],
                                                   new_files=["source/backend/cpu/CPU*.hpp"])})
    with pytest.raises(StageFailure) as ei, candidate_in(ws, t, {"CPUArgMax.hpp": "// overwrite"}):
        pass
    assert ei.value.status == Status.REJECTED_INPUT and "existing MNN file" in ei.value.message


def test_what_a_job_wrote_into_the_sources_is_restored_and_flagged(setup):
    """After a job (the candidate's files restored), the workspace's sources are checked against the pristine tree
    again: a file something the job ran changed is restored and flagged workspace_changed."""
    from kit.stages.build import WORKSPACE_CHANGED, candidate_in

    _, pristine, ws = setup
    planted = ws.src / "source/backend/cpu/planted.txt"
    flags = []
    with candidate_in(ws, task(), {"CPUArgMax.cpp": "REGISTER_CPU_OP_CREATOR(CPUArgMaxCreator, OpType_ArgMax)\n"},
                      flags):
        planted.write_text("left behind")  # what a runner without the sandbox could do
    assert not planted.exists()
    assert [f.code for f in flags] == [WORKSPACE_CHANGED] and "planted.txt" in flags[0].reason
    flags.clear()
    with candidate_in(ws, task(), {"CPUArgMax.cpp": "REGISTER_CPU_OP_CREATOR(CPUArgMaxCreator, OpType_ArgMax)\n"},
                      flags):
        pass
    assert flags == []  # an honest job leaves nothing to flag


def test_the_native_baseline_is_sealed(tmp_path):
    from kit.job.worker import BaselineChanged, Seal

    files = [tmp_path / "libMNN.so", tmp_path / "mkb_runner"]
    for f in files:
        f.write_bytes(b"native " + f.name.encode())
    seal = Seal()
    seal.check(files)
    seal.check(files)  # unchanged: fine
    files[0].write_bytes(b"patched")
    with pytest.raises(BaselineChanged, match="libMNN.so changed since this worker first used it"):
        seal.check(files)


def test_after_a_job_what_a_run_wrote_into_sources_or_build_is_removed_and_flagged(setup):
    """Without the sandbox (``sandbox.mode = "none"``) a candidate's run can write into its workspace: the
    check after the job finds the file in the sources and the files written into the build directory after the
    job's build, removes them, and flags the record; the build's own outputs stay."""
    from kit.results.records import Flag
    from kit.stages.build import WORKSPACE_CHANGED, check_after_job

    _, pristine, ws = setup
    ws.build.mkdir(exist_ok=True)
    (ws.build / "libMNN.so").write_bytes(b"built")
    ws.built_ns = time.time_ns()  # the job's build ends here
    time.sleep(0.01)
    (ws.build / "planted.bin").write_bytes(b"x")  # what its runs wrote
    (ws.src / "source" / "planted.txt").write_text("x")
    flags: list[Flag] = []
    check_after_job(ws, flags)
    assert [f.code for f in flags] == [WORKSPACE_CHANGED]
    assert "build/planted.bin" in flags[0].reason and "src/source/planted.txt" in flags[0].reason
    assert not (ws.build / "planted.bin").exists() and (ws.build / "libMNN.so").read_bytes() == b"built"
    assert tree_digest(ws.src) == pristine.digest
    flags.clear()
    check_after_job(ws, flags)  # a clean workspace: no flag
    assert flags == []


def test_a_moved_workspace_lib_dir_links_its_own_build(tmp_path):
    """A cache copied or moved elsewhere (``cp -a ~/.cache/mkb``): lib/'s links into the old workspace's build are
    made again, relative, so a candidate is never verified with the old tree's libraries."""
    from kit.mnn.native import workspace_lib_dir
    from kit.mnn.workspace import Workspace

    old, new = tmp_path / "old" / "w0", tmp_path / "new" / "w0"
    for root in (old, new):
        (root / "build" / "express").mkdir(parents=True)
        (root / "build" / "libMNN.so").write_text(str(root))
        (root / "build" / "express" / "libMNN_Express.so").write_text(str(root))
    (new / "lib").mkdir()
    os.symlink(old / "build" / "libMNN.so", new / "lib" / "libMNN.so")  # as cp -a leaves it
    libs = workspace_lib_dir(Workspace(new, pristine=None))  # type: ignore[arg-type]
    assert sorted(p.name for p in libs.iterdir()) == ["libMNN.so", "libMNN_Express.so"]
    for link in libs.iterdir():
        assert not os.path.isabs(os.readlink(link)) and link.read_text() == str(new)
