"""kit.host.fstree on real trees: a 2000-level tree removed without RecursionError, links never followed, caps
counted and named; and the kit's scratch handling built on it: a tree left by a kit process that is gone is
removed before the next one starts, a scratch the kit cannot remove is a harness error of that job only."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from kit.host import fstree
from kit.job import pipeline
from kit.job.worker import scratch_root
from kit.results.records import ErrorKind, Status


def _deep(root: Path, levels: int) -> None:
    """``root/d/d/...`` ``levels`` deep, made relative to each last directory (no long path)."""
    root.mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(levels):
        os.mkdir("d", dir_fd=fd)
        nxt = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    os.close(fd)


def test_a_tree_2000_levels_deep_is_removed_and_its_depth_named(tmp_path):
    _deep(tmp_path / "t", 2000)
    fds_before = len(os.listdir("/proc/self/fd"))
    tally = fstree.remove(tmp_path / "t")
    assert not (tmp_path / "t").exists()
    assert tally.entries == 2000 and tally.depth == 2000
    assert "32 levels deep (the kit's cap on depth)" in tally.over
    assert len(os.listdir("/proc/self/fd")) == fds_before  # no descriptor left open


def test_links_are_removed_never_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("host file")
    t = tmp_path / "t"
    (t / "a").mkdir(parents=True)
    (t / "a" / "to_dir").symlink_to(outside)
    (t / "to_file").symlink_to(outside / "keep.txt")
    assert fstree.scan(t).entries == 3
    fstree.remove(t)
    assert not t.exists() and (outside / "keep.txt").read_text() == "host file"
    (tmp_path / "link").symlink_to(outside)  # the folder itself a link: the link goes, not what it names
    fstree.remove(tmp_path / "link")
    assert not (tmp_path / "link").is_symlink() and (outside / "keep.txt").exists()


def test_caps_on_entries_and_bytes_are_named_and_scan_stops_there(tmp_path):
    t = tmp_path / "t"
    t.mkdir()
    for i in range(20):
        (t / f"f{i}").write_bytes(b"x" * 100)
    caps = fstree.Caps(entries=10, depth=4, total_bytes=10_000)
    assert "more than 10 entries" in fstree.scan(t, caps).over
    assert fstree.scan(t, caps).entries == 11  # stopped at the first entry over the cap
    assert "more than 1000 bytes" in fstree.scan(t, fstree.Caps(total_bytes=1000)).over
    assert fstree.scan(t).over == ""
    assert fstree.remove(t, caps).entries == 20 and not t.exists()  # removed anyway


def test_copy_tree_keeps_links_as_links_and_stops_past_a_cap(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "y.bin").write_bytes(b"\1\2\3")
    (src / "link").symlink_to("/dev/zero")
    os.mkfifo(src / "fifo")
    dst.mkdir()
    fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert fstree.copy_tree(fd, dst).over == ""
    finally:
        os.close(fd)
    assert (dst / "sub" / "y.bin").read_bytes() == b"\1\2\3"
    assert os.readlink(dst / "link") == "/dev/zero" and (dst / "fifo").is_fifo()
    deep_dst = tmp_path / "deep_dst"
    deep_dst.mkdir()
    _deep(tmp_path / "deep", 100)
    fd = os.open(tmp_path / "deep", os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert fstree.copy_tree(fd, deep_dst).over
    finally:
        os.close(fd)
    assert fstree.scan(deep_dst).over  # the copy holds the crossing entry: a scan of it names the cap too


def test_scratch_left_by_a_gone_kit_process_is_removed_before_the_next_starts(tmp_path):
    """A deep tree a crashed check left in the kit's scratch (before: every later check died on it)."""
    gone = tmp_path / "scratch" / "999999999"  # beyond pid_max: no live process has it
    gone.mkdir(parents=True)
    _deep(gone / "mkb-job", 2000)
    mine = scratch_root(tmp_path)
    assert mine.name == str(os.getpid()) and not gone.exists()


@pytest.mark.skipif(os.getuid() != 0, reason="chattr +i needs root")
def test_a_scratch_the_kit_cannot_remove_is_a_harness_error_of_that_job(tmp_path):
    scratch = tmp_path / "job"
    scratch.mkdir()
    stuck = scratch / "stuck"
    stuck.write_text("x")
    if subprocess.run(["chattr", "+i", str(stuck)], capture_output=True).returncode != 0:
        pytest.skip("the filesystem has no immutable flag")
    try:
        fail = pipeline._removed(scratch, None)
        assert fail is not None and fail.status == Status.HARNESS_ERROR and fail.kind == ErrorKind.INTERNAL
        assert "could not remove the job's scratch" in fail.message
    finally:
        subprocess.run(["chattr", "-i", str(stuck)], check=True)
    assert pipeline._removed(scratch, None) is None and not scratch.exists()  # the next try starts clean
    _deep(scratch, 50)
    fail = pipeline._removed(scratch, None)
    assert fail is not None and fail.status == Status.RUNTIME_CRASH and fail.kind == ErrorKind.FORBIDDEN
    assert "cap on depth" in fail.message and not scratch.exists()


def test_removing_what_does_not_exist_is_nothing(tmp_path):
    assert fstree.remove(tmp_path / "absent").entries == 0
    assert fstree.remove(tmp_path / "absent" / "below").entries == 0
