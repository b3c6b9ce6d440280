"""A failed native build says why in one line (kit.mnn.buildfail): the first real error of the build's output,
a hint where one is known, the whole output kept in a file of the workspace."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from kit.mnn import build as mbuild


def test_a_confined_build_makes_the_ccache_folder_it_binds(tmp_path: Path):
    """The sandbox binds only paths that exist: a ccache folder missing on a fresh cache was read-only inside it
    (every compile: "ccache: error: Failed to create directory .../ccache/tmp: Read-only file system")."""
    opts = mbuild.BuildOptions(engine="fixture", cache_dir=tmp_path / "cache")
    ws = SimpleNamespace(src=tmp_path / "src", build=tmp_path / "build")
    opts.confine(ws)
    assert (tmp_path / "cache" / "ccache").is_dir()
    (tmp_path / "other").write_text("a file where the cache folder should be")
    mbuild.BuildOptions(engine="fixture", cache_dir=tmp_path / "other").confine(ws)  # the build will say why
