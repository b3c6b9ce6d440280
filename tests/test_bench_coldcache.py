"""The cache-cold benchmark's copies (:func:`kit.bench.coldcache.make_unique`): a fresh nonce changes what the
compiler sees (so ccache misses) and nothing the candidate exports."""

from __future__ import annotations

import os

import pytest

from kit.bench.coldcache import make_unique
from kit.host import proc

SOURCE = "#include <cstdio>\nint kernel(int x) { return 2 * x; }\n"


def _preprocessed(path) -> str:
    res = proc.run(["c++", "-E", "-P", str(path)], timeout_s=60)
    assert res.ok, res.output
    return res.stdout


def test_a_fresh_nonce_changes_the_preprocessed_text_and_no_exported_symbol(tmp_path):
    src = tmp_path / "cand" / "t" / "s"
    src.mkdir(parents=True)
    (src / "K.cpp").write_text(SOURCE)
    (src / "K.hpp").write_text("int kernel(int x);\n")
    os.symlink("K.hpp", src / "link.hpp")
    assert make_unique(tmp_path / "cand", tmp_path / "a", "00aa") == 1
    assert make_unique(tmp_path / "cand", tmp_path / "b", "00bb") == 1
    a, b = tmp_path / "a" / "t" / "s", tmp_path / "b" / "t" / "s"
    assert (a / "K.hpp").read_text() == "int kernel(int x);\n"  # headers untouched
    assert (a / "link.hpp").is_symlink()
    assert _preprocessed(a / "K.cpp") != _preprocessed(b / "K.cpp")
    assert _preprocessed(src / "K.cpp") != _preprocessed(a / "K.cpp")
    obj = tmp_path / "K.o"
    res = proc.run(["c++", "-c", "-O2", "-Wall", "-Werror", str(a / "K.cpp"), "-o", str(obj)], timeout_s=60)
    assert res.ok, res.output
    nm = proc.run(["nm", "-g", "--defined-only", str(obj)], timeout_s=60)
    assert nm.ok and "nonce" not in nm.stdout and "kernel" in nm.stdout


def test_a_nonce_must_be_hexadecimal(tmp_path):
    (tmp_path / "c").mkdir()
    with pytest.raises(ValueError, match="nonce"):
        make_unique(tmp_path / "c", tmp_path / "d", "x\"; int y")
