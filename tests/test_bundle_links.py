"""Candidate files that are symbolic links in a bundle (the sample set's ``reject_symlink``): recorded in the
manifest instead of stored, made again after the hashes are checked, never pointing out of ``candidates/``."""

from __future__ import annotations

import pytest

from kit.bundle.manifest import BundleError, file_hashes, restore_links
from kit.bundle.pack import _take_links


def _candidate(root):
    folder = root / "candidates" / "sample" / "t1" / "reject_symlink"
    folder.mkdir(parents=True)
    (root / "candidates" / "sample" / "t1" / "correct").mkdir()
    (root / "candidates" / "sample" / "t1" / "correct" / "K.cpp").write_text("int k;\n")
    (folder / "K.hpp").write_text("#pragma once\n")
    (folder / "K.cpp").symlink_to("../correct/K.cpp")
    return folder


def test_links_are_recorded_removed_and_made_again(tmp_path):
    root = tmp_path / "b"
    folder = _candidate(root)
    links: dict[str, str] = {}
    _take_links(root / "candidates" / "sample" / "t1", root, links)
    assert links == {"candidates/sample/t1/reject_symlink/K.cpp": "../correct/K.cpp"}
    assert not (folder / "K.cpp").exists() and not (folder / "K.cpp").is_symlink()
    assert "candidates/sample/t1/reject_symlink/K.hpp" in file_hashes(root)  # the tree holds regular files only
    restore_links(root, links)
    assert (folder / "K.cpp").is_symlink() and (folder / "K.cpp").read_text() == "int k;\n"


@pytest.mark.parametrize("rel, target", [
    ("candidates/sample/t1/x.cpp", "/etc/passwd"),                     # absolute
    ("candidates/sample/t1/x.cpp", "../../../../outside"),             # climbs out of candidates/
    ("tasks/t1/model.onnx", "../../candidates/sample/t1/correct/K.cpp"),  # not under candidates/
    ("candidates/sample/t1/correct/K.cpp", "K.hpp"),                   # a file is there already
])
def test_a_link_that_leaves_candidates_or_overwrites_is_refused(tmp_path, rel, target):
    root = tmp_path / "b"
    _candidate(root)
    with pytest.raises(BundleError, match="links:"):
        restore_links(root, {rel: target})
