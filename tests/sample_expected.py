"""The expected status of every sample candidate (``candidates/expected.toml``) for one target architecture, and
the ways a run's records differ from it (the real-tree tests and CI's check of the main command,
``.ci/check_main.py``, use the same comparison)."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

EXPECTED_FILE = Path(__file__).resolve().parent.parent / "candidates" / "expected.toml"


def expected_statuses(arch: str = "x86_64", path: Path = EXPECTED_FILE) -> dict[str, str]:
    """``"<task_id>/<sample_id>"`` → status for ``arch``: the statuses of every target, then ``[by_target.<arch>]``."""
    data = tomllib.loads(path.read_text())
    common = {k: v for k, v in data.items() if isinstance(v, str)}
    return common | data.get("by_target", {}).get(arch, {})


def status_differences(records: Iterable[Mapping[str, Any]], arch: str = "x86_64",
                       path: Path = EXPECTED_FILE) -> list[str]:
    """One line per difference between the records of method ``sample`` (``task_id``, ``sample_id``, ``status``,
    ``error_message``) and the expected statuses for ``arch``: another status (with the record's message), an
    expected sample without a record, a record of a sample that is not expected.  Empty when they agree."""
    expected = expected_statuses(arch, path)
    got = {f"{r['task_id']}/{r['sample_id']}": r for r in records if r.get("method", "sample") == "sample"}
    out = []
    for key, want in sorted(expected.items()):
        if key not in got:
            out.append(f"{key}: expected {want}, no record")
        elif got[key]["status"] != want:
            msg = " ".join((got[key].get("error_message") or "").split())[:200]
            out.append(f"{key}: expected {want}, got {got[key]['status']}" + (f" ({msg})" if msg else ""))
    out += [f"{key}: got {got[key]['status']}, not in {path.name}" for key in sorted(set(got) - set(expected))]
    return out
