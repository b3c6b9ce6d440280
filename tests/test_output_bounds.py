"""What a command may print or write, bounded (kit.host.proc): 1 GiB printed on stdout and on stderr leaves the
kit's process within a few MiB of where it was, every stamp line kept whole and the rest cut with a note; a
sandboxed command's bounded directory (a tmpfs of ``View.bound_bytes``) brought back after its exit (all of it, or
the entries named), or, filled to its bound, dropped and named in the result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kit.host import proc, sandbox, sandbox_check

#: what a 1 GiB print may add to the kit's peak memory (MiB): 2 x 256 KiB of log, 2 x 16 MiB of kept lines at
#: most, one 1 MiB read, the interpreter's own churn
PRINT_BOUND_MB = 64

_MEASURE = r"""
import json, resource, sys
from kit.host import proc
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
r = proc.run(["sh", "-c", sys.argv[1]], keep_lines="@mkbt", keep_bytes=16 << 20, timeout_s=600)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"before_kb": before, "after_kb": after, "rc": r.returncode, "truncated": r.truncated,
                  "stamps": [l for l in r.stderr.splitlines() if "@mkbt" in l],
                  "out_len": len(r.stdout), "err_len": len(r.stderr), "note": "bytes left out" in r.stdout}))
"""


def test_a_1gib_print_on_each_stream_keeps_the_kit_within_its_bound_and_every_stamp():
    """Measured in a fresh interpreter (ru_maxrss is a peak): before the bounded capture the kit kept all of it
    and then a copy (a 1 GiB stdout took it to 2.3 GB)."""
    script = ('for i in 1 2 3; do echo "@mkbt F $i 1" >&2; done; head -c 1073741824 /dev/zero | tr "\\0" x; '
              'echo "@mkbt E 3 2" >&2; head -c 1073741824 /dev/zero | tr "\\0" y >&2; echo >&2; echo "@mkbt e 3" >&2')
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-c", _MEASURE, script], capture_output=True, text=True, env=env,
                         timeout=900, check=True)
    m = json.loads(out.stdout)
    grew_mb = (m["after_kb"] - m["before_kb"]) / 1024
    print(f"kit peak memory: {m['before_kb'] / 1024:.1f} MiB before, {m['after_kb'] / 1024:.1f} MiB after 2 GiB printed")
    assert m["rc"] == 0 and m["truncated"] and m["note"]
    assert grew_mb < PRINT_BOUND_MB, m
    assert m["stamps"] == ["@mkbt F 1 1", "@mkbt F 2 1", "@mkbt F 3 1", "@mkbt E 3 2", "@mkbt e 3"]
    assert m["out_len"] < 300 * 1024 and m["err_len"] < 300 * 1024


def test_marker_lines_beyond_their_cap_leave_a_note_that_names_it():
    r = proc.run(["sh", "-c", "for i in $(seq 1 200); do echo \"@mkbt e $i\" >&2; done"], keep_lines="@mkbt",
                 keep_bytes=100, log_limit=1000)
    kept = [line for line in r.stderr.splitlines() if "@mkbt" in line]
    assert kept[0] == "@mkbt e 1" and "left out: the kit keeps 100" in kept[-1] and r.truncated
    # a stamp written after a long unfinished line joins it: kept as a note (a malformed stamp line), not whole
    r = proc.run(["sh", "-c", "head -c 100000 /dev/zero | tr '\\0' z >&2; echo '@mkbt e 1' >&2"],
                 keep_lines="@mkbt", keep_bytes=1000)
    assert [line for line in r.stderr.splitlines() if line.startswith("@mkbt")] == [
        "@mkbt [a line of more than 4096 bytes holding this text: left out]"]


needs_bwrap = pytest.mark.skipif(bool(sandbox_check.bwrap_works()), reason=f"{sandbox_check.bwrap_works()}")


@needs_bwrap
def test_a_bounded_directory_is_brought_back_after_the_exit(tmp_path):
    out = tmp_path / "out"
    confine = sandbox.Policy(True, out_bytes=16 << 20).confine(bounded=[out], step="test")
    r = proc.run(["sh", "-c", f"mkdir {out}/0 && echo hi > {out}/0/y.bin && ln -s /etc/passwd {out}/l"],
                 confine=confine, timeout_s=60)
    assert r.ok and r.full == ()
    assert (out / "0" / "y.bin").read_text() == "hi\n" and os.readlink(out / "l") == "/etc/passwd"


@needs_bwrap
def test_only_the_named_entries_of_a_bounded_directory_come_back(tmp_path):
    # the native side of a timing: its times, not its outputs (nothing compares them)
    out = tmp_path / "out"
    confine = sandbox.Policy(True, out_bytes=16 << 20).confine(bounded=[out], step="test", bring_back=("timing.json",))
    r = proc.run(["sh", "-c", f"mkdir -p {out}/0 {out}/checked/0 && echo y > {out}/0/y.bin && echo t > {out}/timing.json"],
                 confine=confine, timeout_s=60)
    assert r.ok and sorted(p.name for p in out.iterdir()) == ["timing.json"]
    assert (out / "timing.json").read_text() == "t\n"


@needs_bwrap
def test_a_bounded_directory_filled_through_several_files_is_dropped_and_named(tmp_path):
    """The per-file limit holds each file under 8 MiB; the bound (16 MiB) holds their sum: nothing comes back,
    the result names the directory and is not ok."""
    out = tmp_path / "out"
    policy = sandbox.Policy(True, sandbox.Limits(file_bytes=8 << 20), out_bytes=16 << 20)
    script = f"for i in $(seq 1 12); do head -c 4000000 /dev/zero > {out}/f$i; done; exit 0"
    r = proc.run(["sh", "-c", script], confine=policy.confine(bounded=[out], step="test"), timeout_s=60)
    assert r.full == (str(out),) and not r.ok
    assert list(out.iterdir()) == []
    w = proc.start(["sh", "-c", f"echo READY; read x; for i in 1 2 3; do head -c 6000000 /dev/zero > {out}/big$i; done"], ready_line="READY",
                   confine=policy.confine(bounded=[out], step="test"), timeout_s=60)
    assert isinstance(w, proc.Waiting)
    assert w.go(timeout_s=60).full == (str(out),) and list(out.iterdir()) == []
