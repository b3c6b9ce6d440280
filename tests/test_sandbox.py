"""kit.host.sandbox through kit.host.proc, for real (bubblewrap from Debian; CI installs it): what a confined command
can see and do, the rlimits and how their hits are named, and what happens where bubblewrap is missing."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from kit.host import proc, sandbox, sandbox_check
from kit.results.records import ErrorKind, Status
from kit.stages.runfailure import process_failure

BWRAP = pytest.mark.skipif(bool(sandbox_check.bwrap_works()), reason=f"bubblewrap does not work here: {sandbox_check.bwrap_works()}")


def _confined(tmp_path: Path, limits: sandbox.Limits | None = None, **kw) -> sandbox.Confinement:
    (tmp_path / "in").mkdir(exist_ok=True)
    (tmp_path / "out").mkdir(exist_ok=True)
    (tmp_path / "in" / "data.txt").write_text("input")
    return sandbox.Policy(True, limits or sandbox.Limits()).confine(ro=[tmp_path / "in"], rw=[tmp_path / "out"], **kw)


@BWRAP
def test_a_confined_command_sees_only_the_system_and_its_paths(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("host file")
    script = (f"cat {tmp_path}/in/data.txt; echo; ls /; cat {secret} 2>&1; ls /root 2>&1; ls /etc; "
              f"cat /etc/passwd 2>&1; echo ok > {tmp_path}/out/w; echo x > {tmp_path}/in/w 2>&1; echo $$")
    res = proc.run(["bash", "-c", script], confine=_confined(tmp_path))
    lines = res.stdout.splitlines()
    assert lines[0] == "input"  # the read-only input
    assert set(lines[1:10]) >= {"bin", "dev", "etc", "lib", "proc", "tmp", "usr"} and "root" not in lines
    assert "alternatives" in lines and "/etc/passwd: No such file" in res.stdout  # /etc holds the alternatives only
    assert "host file" not in res.stdout and "No such file" in res.stdout  # nothing of the host beyond its paths
    assert (tmp_path / "out" / "w").read_text() == "ok\n" and not (tmp_path / "in" / "w").exists()
    assert "Read-only file system" in res.output
    assert lines[-1] == "2"  # its own PID namespace (bubblewrap's init is 1)


@BWRAP
def test_a_command_starts_in_its_directory_when_it_sees_it_else_in_its_private_tmp(tmp_path):
    """The same behaviour wherever the kit's directories lie: a working directory the sandbox does not show
    would be a read-only mount point outside /tmp and a writable one under it."""
    hidden = tmp_path / "scratch"
    hidden.mkdir()
    confine = _confined(tmp_path)
    res = proc.run(["bash", "-c", "pwd; echo x > f && echo wrote"], cwd=hidden, confine=confine)
    assert res.stdout.split() == ["/tmp", "wrote"] and not (hidden / "f").exists()
    res = proc.run(["bash", "-c", "pwd; echo x > f && echo wrote"], cwd=tmp_path / "out", confine=confine)
    assert res.stdout.split() == [str(tmp_path / "out"), "wrote"] and (tmp_path / "out" / "f").exists()
    res = proc.run(["pwd"], cwd=tmp_path / "in", confine=confine)
    assert res.stdout.strip() == str(tmp_path / "in")


@BWRAP
def test_no_network_and_nothing_outlives_the_command(tmp_path):
    # a sleep no other process on the host runs (a plain `sleep 30` of another program was seen here)
    sleeper = f"sleep 30.{os.getpid() % 1000:03d}{time.monotonic_ns() % 1000:03d}"
    res = proc.run(["bash", "-c", "ls /sys/class/net 2>/dev/null || cat /proc/net/dev; "
                                  f"({sleeper}; echo late > {tmp_path}/out/late) & disown; echo started"],
                   confine=_confined(tmp_path), timeout_s=20)
    assert res.ok and "started" in res.stdout
    assert "eth" not in res.stdout and "ens" not in res.stdout  # loopback only
    time.sleep(0.5)
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline(p) == sleeper]
    assert not (tmp_path / "out" / "late").exists()


def _cmdline(p: Path) -> str:
    try:
        return (p / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


@BWRAP
def test_limits_stop_the_command_and_are_named(tmp_path):
    limits = sandbox.Limits(file_bytes=1 << 20, processes=8)
    big = proc.run(["bash", "-c", f"head -c 5000000 /dev/zero > {tmp_path}/out/big"], confine=_confined(tmp_path, limits))
    assert (tmp_path / "out" / "big").stat().st_size == 1 << 20  # the file stopped at the limit
    # a fork bomb stops at the process limit (a pids cgroup when run as root, where RLIMIT_NPROC does not apply)
    if os.getuid() == 0 and sandbox.pids_root() is None:
        pytest.skip("root without a writable pids cgroup hierarchy: no process limit here")
    bomb = proc.run(["python3", "-c", "import os, time\nfor _ in range(40):\n    if os.fork() == 0:\n"
                                      "        time.sleep(5); os._exit(0)"], confine=_confined(tmp_path, limits), timeout_s=30)
    assert "Resource temporarily unavailable" in bomb.stderr, bomb.output
    fail = process_failure(bomb, "runner")
    assert fail is not None and fail.kind is ErrorKind.LIMIT and "process limit (sandbox.processes)" in fail.message
    # a process killed by the file-size signal: bubblewrap's exit status 128 + N is read back as the signal
    xfsz = proc.run(["bash", "-c", f"exec head -c 5000000 /dev/zero > {tmp_path}/out/big2"],
                    confine=_confined(tmp_path, limits))
    assert xfsz.signal == 25, (xfsz.returncode, xfsz.stderr)
    fail = process_failure(xfsz, "runner")
    assert fail.status is Status.RUNTIME_CRASH and fail.kind is ErrorKind.LIMIT and "file-size limit" in fail.message
    del big


@BWRAP
def test_a_crash_inside_the_sandbox_reads_as_its_signal(tmp_path):
    res = proc.run(["bash", "-c", "kill -SEGV $$"], confine=_confined(tmp_path))
    assert res.signal == 11 and res.returncode == -11


def test_modes_where_bubblewrap_is_missing(monkeypatch, caplog):
    assert sandbox_check.resolve("none") is False
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: None)
    sandbox_check.bwrap_works.cache_clear()
    sandbox_check._warn_once.cache_clear()
    try:
        with pytest.raises(sandbox.SandboxError, match="not installed"):
            sandbox_check.resolve("bwrap")
        with caplog.at_level("WARNING", logger="kit"):
            assert sandbox_check.resolve("auto") is False
        assert "without filesystem, network and PID isolation" in caplog.text
    finally:
        sandbox_check.bwrap_works.cache_clear()
        sandbox_check._warn_once.cache_clear()


def test_process_limit_is_an_rlimit_for_users_and_a_pids_cgroup_for_root():
    lim = sandbox.Limits(processes=10)
    nproc = [a for a in lim.prlimit_args() if a.startswith("--nproc=")]
    if os.getuid() != 0:  # RLIMIT_NPROC counts every process of the user: on top of those running now
        assert int(nproc[0].split("=")[1]) >= sandbox.user_processes() + 10 - 5  # processes come and go
        assert sandbox.process_group_for(lim) is None
        return
    assert nproc == []  # the kernel ignores RLIMIT_NPROC for root
    group = sandbox.process_group_for(lim)
    if sandbox.pids_root() is None:
        assert group is None
        return
    assert (group.path / "pids.max").read_text().strip() == "10"
    group.release()
    assert not group.path.exists()


def test_groups_of_dead_kit_processes_are_swept():
    root = sandbox.pids_root()
    if os.getuid() != 0 or root is None:
        pytest.skip("no pids cgroup hierarchy here")
    dead = 2**22 - 7  # above pid_max's default: no such process
    stale = root / f"mkb-{dead}-1"
    stale.mkdir()
    mine = sandbox.PidsGroup(root, 5)  # a live process's own group stays
    try:
        assert sandbox.sweep_groups(root) >= 1
        assert not stale.exists() and mine.path.exists()
    finally:
        mine.release()
        if stale.exists():
            stale.rmdir()


@BWRAP
@pytest.mark.slow  # builds the fixture engine in the sandbox (~45 s)
def test_a_tree_configured_outside_builds_inside(fixture_engine, tmp_path):
    """CMake records the compiler as /usr/bin/c++, a link through /etc/alternatives on Debian: a workspace
    configured outside the sandbox (an older kit, ``sandbox.mode = "none"``) still builds inside it."""
    build = tmp_path / "build"
    build.mkdir()
    conf = proc.run(["cmake", "-G", "Ninja", str(fixture_engine)], cwd=build, timeout_s=300)
    assert conf.ok, conf.output[-2000:]
    policy = sandbox.Policy(True, sandbox.Limits(memory_bytes=2 << 30))
    res = proc.run(["ninja", "-j", "2"], cwd=build, timeout_s=600, confine=policy.confine(ro=[fixture_engine],
                                                                                          rw=[build]))
    assert res.ok, res.output[-2000:]
    assert (build / "libMNN.so").is_file()


@BWRAP
def test_a_missing_writable_path_is_created_owned_by_the_user_and_writable_inside(tmp_path):
    """Outside /tmp (the private tmpfs would hide a path left out): a cache folder under /var/tmp."""
    base = Path(tempfile.mkdtemp(prefix="mkb-rw-", dir="/var/tmp"))
    try:
        want = base / "cache" / "ccache"  # neither it nor its parent exists
        confine = sandbox.Policy(True).confine(rw=[want], step="build")
        res = proc.run(["bash", "-c", f"echo data > {want}/f && echo wrote"], confine=confine)
        assert res.stdout.strip() == "wrote", res.output
        for d in (want, want.parent):
            st = d.stat()
            assert d.is_dir() and st.st_uid == os.getuid() and st.st_gid == os.getgid()
            assert not st.st_mode & 0o022  # nobody else may write
        assert (want / "f").read_text() == "data\n"
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(sandbox.bwrap_path() is None, reason="bubblewrap is not installed")
def test_a_missing_read_only_path_is_an_error_naming_it_and_its_step(tmp_path):
    missing = tmp_path / "no_such_lib"
    confine = sandbox.Policy(True).confine(ro=[missing, "/usr/no/such/dir"], rw=[tmp_path / "out"], step="runner x")
    with pytest.raises(sandbox.SandboxError, match=f"runner x: its read-only path {missing} does not exist"):
        sandbox.prefix(confine.view)
    # under /usr is fine: the system bind shows whatever is there
    ok = sandbox.Policy(True).confine(ro=["/usr/no/such/dir"], rw=[tmp_path / "out"])
    assert "/usr/no/such/dir" not in sandbox.prefix(ok.view)


@pytest.mark.skipif(sandbox.bwrap_path() is None, reason="bubblewrap is not installed")
def test_a_writable_path_that_cannot_be_made_is_an_error_naming_it(tmp_path):
    (tmp_path / "file").write_text("x")
    confine = sandbox.Policy(True).confine(rw=[tmp_path / "file" / "sub"], step="build in w0")
    with pytest.raises(sandbox.SandboxError, match=f"build in w0: cannot create its writable path {tmp_path}/file/sub"):
        sandbox.prefix(confine.view)


def test_lib_dirs_leave_out_dangling_links(tmp_path):
    lib, built = tmp_path / "lib", tmp_path / "build"
    lib.mkdir()
    built.mkdir()
    (built / "libA.so").write_text("")
    (lib / "libA.so").symlink_to(built / "libA.so")
    (lib / "libB.so").symlink_to(tmp_path / "gone" / "libB.so")  # a library its build did not make
    assert sandbox.lib_dirs(lib) == sorted([str(lib), str(built)])
