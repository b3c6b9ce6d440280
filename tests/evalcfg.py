"""One writer of the evaluation configs the end-to-end tests use: the run directory, one task suite and its ids,
one candidate source, optionally ``[mnn]`` (none: the defaults, the real tree from ``MKB_MNN__SOURCE_DIR``), then
any further sections given as dicts (``build={"jobs": 2}``, ``timing={...}``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kit.settings.tomlvalue import toml_value


def _value(v: Any) -> str:
    return toml_value(v if isinstance(v, (bool, int, float, list, tuple)) else str(v))


def write_config(path: Path, *, run_dir: Path, tasks_dir: Path, ids: list[str], method: str, candidates: Path,
                 mnn: dict[str, Any] | None = None, more_sources: dict[str, Path] | None = None,
                 **sections: dict[str, Any]) -> Path:
    """Write the config to ``path`` (the serial mode and no report unless ``dispatch`` / ``report`` say
    otherwise) and return ``path``; ``more_sources``: further candidate sources, method → path."""
    sections = {"dispatch": {"mode": "serial"}, "report": {"enabled": False}, **sections}
    if mnn is not None:
        sections = {"mnn": mnn, **sections}
    lines = ["[run]", f"dir = {_value(run_dir)}", "[tasks]", f"dir = {_value(tasks_dir)}", 'split = "all"',
             "ids = [" + ", ".join(_value(i) for i in ids) + "]",
             "[[candidates.sources]]", f"method = {_value(method)}", f"path = {_value(candidates)}"]
    for more, where in (more_sources or {}).items():
        lines += ["[[candidates.sources]]", f"method = {_value(more)}", f"path = {_value(where)}"]
    for name, keys in sections.items():
        lines += [f"[{name}]"] + [f"{k} = {_value(v)}" for k, v in keys.items()]
    path.write_text("\n".join(lines) + "\n")
    return path
