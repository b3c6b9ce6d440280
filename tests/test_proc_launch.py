"""The launcher (kit/host/proc/launch.c) and the chain it replaces where it cannot be compiled set the same
around a command: its rlimits, its pids cgroup, its CPU affinity, its parent-death signal, its exit status, and
with ``cpu_account`` the CPU time of its whole tree (a sandboxed one too); the launcher is compiled once into the
cache, and without a working compiler the kit says why and keeps the chain."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kit.host import machine, proc, sandbox, sandbox_check
from kit.host.proc import launch

ROOT = Path(__file__).resolve().parents[1]
_NO_BWRAP = sandbox_check.bwrap_works()


@pytest.fixture(params=["launcher", "chain"])
def way(request, monkeypatch):
    """Each test once through the launcher, once through the chain (sh, prlimit, setpriv, taskset, subreaper)."""
    if request.param == "launcher":
        assert launch.binary(proc.run) is not None, "the launcher compiles here"
    else:
        monkeypatch.setattr(launch, "binary", lambda run: None)
    return request.param


def test_limits_cgroup_and_affinity_are_set(way):
    limits = sandbox.Limits(memory_bytes=1 << 30, cpu_s=7, file_bytes=1 << 20, open_files=77, processes=50)
    core = machine.usable_cores()[-1]
    res = proc.run(["sh", "-c", "cat /proc/self/limits; grep Cpus_allowed_list /proc/self/status; "
                    "cat /proc/self/cgroup"], confine=sandbox.Confinement(limits), cpus=[core])
    assert res.ok, res.output
    rows = {ln[:26].strip(): ln[26:].split()[:2] for ln in res.stdout.splitlines() if ln.startswith("Max ")}
    assert rows["Max core file size"] == ["0", "0"]
    assert rows["Max address space"] == [str(1 << 30)] * 2
    assert rows["Max cpu time"] == ["7", "12"]
    assert rows["Max file size"] == [str(1 << 20)] * 2
    assert rows["Max open files"] == ["77", "77"]
    assert f"Cpus_allowed_list:\t{core}\n" in res.stdout
    if os.getuid() != 0:
        assert int(rows["Max processes"][0]) >= 50
    elif sandbox.pids_root() is not None:
        assert "/mkb-" in res.stdout.rsplit("Cpus_allowed_list", 1)[1]  # in the command's own pids cgroup


@pytest.mark.parametrize("account", [False, True], ids=["direct", "reaped"])
def test_exit_statuses_read_the_same(way, account):
    assert proc.run(["sh", "-c", "exit 3"], cpu_account=account).returncode == 3
    res = proc.run(["sh", "-c", "kill -TERM $$"], cpu_account=account)
    assert (res.returncode, res.signal) == (-15, 15)
    with pytest.raises(FileNotFoundError):
        proc.run(["/nonexistent/program"], cpu_account=account)


#: burns 0.2 s of CPU in a grandchild: orphaned (its parent exits at once) or waited for
_BURN = ("import os, sys, time\nif os.fork() == 0:\n    if sys.argv[1] == 'wait' or os.fork() == 0:\n"
         "        t = time.process_time()\n        while time.process_time() - t < 0.2: pass\n    os._exit(0)\n"
         "os.wait()\n")


@pytest.mark.parametrize("boxed", [False, True], ids=["plain", "sandboxed"])
def test_the_cpu_time_of_the_whole_tree_is_accounted(way, boxed):
    """Plain: the grandchild is orphaned, so only a subreaper that waits for it keeps its time.  Sandboxed, it is
    waited for (the namespace's init kills the orphans when it leaves), and bubblewrap's outer process does not
    wait for the init: only a subreaper keeps the time of the init and so of the whole sandbox."""
    if boxed and _NO_BWRAP:
        pytest.skip(f"needs bubblewrap: {_NO_BWRAP}")
    confine = sandbox.Policy(enabled=boxed).confine(ro=[sys.prefix, sys.base_prefix], step="burn")
    res = proc.run(["/usr/bin/python3", "-c", _BURN, "wait" if boxed else "orphan"], confine=confine,
                   cpu_account=True, timeout_s=60)
    assert res.ok, res.output
    assert res.cpu_s is not None and 0.2 <= res.cpu_s <= 1.0


def test_a_command_dies_with_its_killed_parent(way, tmp_path):
    """The parent-death signal: a kit process killed by SIGKILL takes its command (and its tree) with it."""
    pid_file = tmp_path / "child.pid"
    off = "launch.binary = lambda run: None; " if way == "chain" else ""
    code = (f"from kit.host import proc; from kit.host.proc import launch; {off}"
            f"proc.run(['sh', '-c', 'echo $$ > {pid_file}; exec sleep 300'], cpu_account=True)")
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 60
    while not (pid_file.is_file() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline and parent.poll() is None, "the command wrote its pid"
        time.sleep(0.02)
    child = int(pid_file.read_text())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 30
    while Path(f"/proc/{child}").exists() and "Z" not in Path(f"/proc/{child}/stat").read_text().split(")")[-1][:3]:
        assert time.monotonic() < deadline, "the command died with its parent"
        time.sleep(0.02)


def test_the_launcher_leaves_when_its_parent_is_gone_already():
    """The parent check after the parent-death signal is set: a launcher whose parent is not the one named (it
    died in between) exits 137 before running anything."""
    res = subprocess.run([launch.binary(proc.run), "--parent=1", "--", "sh", "-c", "echo ran"], capture_output=True)
    assert (res.returncode, res.stdout) == (137, b"")
    res = subprocess.run([launch.binary(proc.run), "--bogus", "--", "true"], capture_output=True, text=True)
    assert res.returncode == 126 and "bad option --bogus" in res.stderr


def _fresh(monkeypatch, tmp_path: Path, path: str) -> None:
    monkeypatch.setenv("MKB_MNN__CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", path)
    monkeypatch.setattr(launch, "_found", {})


def test_without_a_working_compiler_the_chain_runs_and_why_is_logged(monkeypatch, tmp_path, caplog):
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("sh", "prlimit", "setpriv", "taskset", "true"):  # what the chain needs, but no compiler
        (bare / tool).symlink_to(subprocess.check_output(["sh", "-c", f"command -v {tool}"], text=True).strip())
    _fresh(monkeypatch, tmp_path, str(bare))
    with caplog.at_level(logging.WARNING, logger="kit.host.proc.launch"):
        assert launch.binary(proc.run) is None
        assert launch.binary(proc.run) is None  # said once
        res = proc.run(["sh", "-c", "kill -TERM $$"], cpu_account=True, confine=sandbox.Confinement(sandbox.Limits()))
    assert (res.signal, res.cpu_s is not None) == (15, True)
    assert [r.getMessage() for r in caplog.records if "no C compiler on PATH" in r.getMessage()] != []
    assert len(caplog.records) == 1
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "cc").write_text("#!/bin/sh\necho no such luck >&2\nexit 1\n")
    (broken / "cc").chmod(0o755)
    _fresh(monkeypatch, tmp_path, f"{broken}:{bare}")
    with caplog.at_level(logging.WARNING, logger="kit.host.proc.launch"):
        assert launch.binary(proc.run) is None
    assert "failed (1): no such luck" in caplog.records[-1].getMessage()
    assert not list((tmp_path / "cache" / "launch").iterdir())  # nothing half-written left


def test_workers_compiling_at_once_get_the_same_whole_binary(monkeypatch, tmp_path):
    _fresh(monkeypatch, tmp_path, os.environ["PATH"])
    code = "from kit.host import proc; from kit.host.proc import launch; print(launch.binary(proc.run))"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    workers = [subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
               for _ in range(3)]
    paths = {w.communicate(timeout=300)[0].strip() for w in workers}
    assert len(paths) == 1 and (found := paths.pop()) != "None"
    assert [p.name for p in (tmp_path / "cache" / "launch").iterdir()] == [Path(found).name]
    assert launch.binary(proc.run) == found  # found, not compiled again
    Path(found).unlink()  # a cache cleaned while the process lives: compiled again, not started
    assert launch.binary(proc.run) == found and proc.run(["true"]).ok


def test_a_damaged_launcher_in_the_cache_is_compiled_again_and_one_that_runs_nothing_is_refused(monkeypatch, tmp_path,
                                                                                               caplog):
    """A cached launcher cut short or overwritten (a crash before its bytes reached the disk) fails its trial and is
    compiled again, instead of failing every command with ENOEXEC; a "launcher" that exits 0 without running the
    command (a broken compiler's output) fails the trial too: the chain runs, and why is one printable line."""
    _fresh(monkeypatch, tmp_path, os.environ["PATH"])
    found = launch.binary(proc.run)
    assert found is not None
    Path(found).write_bytes(b"\x7fELF cut short")
    monkeypatch.setattr(launch, "_found", {})  # a new process
    assert launch.binary(proc.run) == found
    res = proc.run(["sh", "-c", "echo hi; exit 3"], cpu_account=True)
    assert (res.returncode, res.stdout) == (3, "hi\n")
    fake = tmp_path / "fake"
    fake.mkdir()
    # a compiler whose output is a script that runs nothing and exits 0, with a line of non-printable noise
    (fake / "cc").write_text("#!/bin/sh\nwhile [ \"$1\" != -o ]; do shift; done\n"
                             "printf '#!/bin/sh\\nexit 0\\n' > \"$2\"; chmod +x \"$2\"\nprintf '\\001\\002 noise\\n' >&2\n")
    (fake / "cc").chmod(0o755)
    _fresh(monkeypatch, tmp_path / "other", f"{fake}:{os.environ['PATH']}")
    with caplog.at_level(logging.WARNING, logger="kit.host.proc.launch"):
        assert launch.binary(proc.run) is None
    message = caplog.records[-1].getMessage()
    assert "does not run a command as asked (exit 0)" in message and "\n" not in message
    res = proc.run(["sh", "-c", "echo hi; exit 3"], cpu_account=True)
    assert (res.returncode, res.stdout) == (3, "hi\n")


def test_a_launcher_that_cannot_be_executed_is_said_so(tmp_path):
    """A launcher file without execute permission (as on a noexec mount) is refused naming that, not as a file
    that does not exist."""
    plain = tmp_path / "launch-x"
    plain.write_text("#!/bin/sh\nexit 0\n")
    plain.chmod(0o644)
    assert "cannot be executed there" in launch._trial(str(plain), proc.run)
