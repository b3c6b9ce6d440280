"""The expected status of every sample candidate (``candidates/expected.toml``) for one target architecture."""

from __future__ import annotations

import tomllib
from pathlib import Path

EXPECTED_FILE = Path(__file__).resolve().parent.parent / "candidates" / "expected.toml"


def expected_statuses(arch: str = "x86_64", path: Path = EXPECTED_FILE) -> dict[str, str]:
    """``"<task_id>/<sample_id>"`` → status for ``arch``: the statuses of every target, then ``[by_target.<arch>]``."""
    data = tomllib.loads(path.read_text())
    common = {k: v for k, v in data.items() if isinstance(v, str)}
    return common | data.get("by_target", {}).get(arch, {})
