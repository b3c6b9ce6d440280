"""The subprocess runner: timeouts kill the whole group, signals and exit codes are reported."""

from __future__ import annotations

import os
import sys

import pytest

from kit import proc


def test_exit_code_and_output():
    r = proc.run([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"])
    assert r.returncode == 3 and not r.ok and r.signal is None
    assert r.stdout.strip() == "out" and r.stderr.strip() == "err"


def test_signal_is_reported():
    r = proc.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"])
    assert r.signal == 11 and r.returncode == -11


def test_timeout_kills_the_process_group(tmp_path):
    marker = tmp_path / "child.pid"
    code = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(marker)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(60)\n"
    )
    r = proc.run([sys.executable, "-c", code], timeout_s=1.5, grace_s=0.5)
    assert r.timed_out and not r.ok
    child = int(marker.read_text())
    # the grandchild was in the same group and is gone (or a zombie reaped by init)
    with pytest.raises(ProcessLookupError):
        for _ in range(50):
            os.kill(child, 0)
            import time

            time.sleep(0.05)
            st = open(f"/proc/{child}/stat").read().split()[2]
            if st == "Z":
                raise ProcessLookupError


def test_output_is_truncated_head_and_tail():
    r = proc.run([sys.executable, "-c", "print('A' * 5000 + 'B' * 5000 + 'END')"], log_limit=1000)
    assert r.truncated and "bytes cut" in r.stdout
    assert r.stdout.startswith("A") and r.stdout.rstrip().endswith("END")


def test_environment_is_explicit(monkeypatch):
    monkeypatch.setenv("MKB_SECRET_FOR_TEST", "1")
    r = proc.run([sys.executable, "-c", "import os; print(os.environ.get('MKB_SECRET_FOR_TEST'))"])
    assert r.stdout.strip() == "None"
    r = proc.run([sys.executable, "-c", "import os; print(os.environ['X'])"], env=proc.base_env({"X": "y"}))
    assert r.stdout.strip() == "y"


def test_memory_limit():
    r = proc.run([sys.executable, "-c", "b = bytearray(2_000_000_000)"], memory_limit_bytes=500_000_000)
    assert not r.ok and "MemoryError" in r.stderr


def test_missing_program():
    with pytest.raises(FileNotFoundError):
        proc.run(["/nonexistent/program"])
