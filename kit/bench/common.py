"""What the benchmarks share: the engine they run on (the real MNN tree when ``MKB_MNN__SOURCE_DIR`` is set,
else the fixture engine shipped with the tests) and its config."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def real_engine() -> bool:
    """Whether the benchmarks run on a real MNN tree (``MKB_MNN__SOURCE_DIR`` set)."""
    return bool(os.environ.get("MKB_MNN__SOURCE_DIR"))


def sample_root(real: bool, root: Path = ROOT) -> Path:
    """The sample candidate set of the engine in the checkout ``root`` (default this one)."""
    return (root / "candidates" / "sample") if real else (root / "tests" / "fixture_engine" / "candidates" / "sample")


def default_protocol(root: Path = ROOT) -> dict[str, dict]:
    """The ``[verify]`` and ``[timing]`` sections of ``configs/default.toml`` in the checkout ``root``."""
    data = tomllib.loads((root / "configs" / "default.toml").read_text())
    return {k: dict(data[k]) for k in ("verify", "timing") if k in data}


def write_config(tmp: Path, real: bool, task_id: str, cands: Path) -> Path:
    if real:
        src = os.environ["MKB_MNN__SOURCE_DIR"]
        engine, tasks_dir = "mnn", ROOT / "tasks"
        cache = os.environ.get("MKB_MNN__CACHE_DIR", str(Path.home() / ".cache" / "mkb"))
    else:
        src = str(ROOT / "tests" / "fixture_engine")
        engine, tasks_dir = "fixture", ROOT / "tests" / "fixture_engine" / "tasks"
        cache = str(tmp / "cache")
    p = tmp / "bench.toml"
    p.write_text(
        f"""
[run]
dir = "{tmp / 'run'}"
[tasks]
dir = "{tasks_dir}"
split = "all"
ids = ["{task_id}"]
[[candidates.sources]]
method = "bench"
path = "{cands}"
[mnn]
engine = "{engine}"
source_dir = "{src}"
cache_dir = "{cache}"
"""
    )
    return p


def toml_sections(sections: dict[str, dict]) -> str:
    """``sections`` (section name -> key -> a string, number or boolean) as TOML text, one ``[name]`` each (JSON's
    quoting of strings is TOML's)."""
    return "".join(f"[{name}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items())
                   for name, values in sections.items())
