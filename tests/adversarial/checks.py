"""What every corpus run checks (``tests/test_adversarial.py`` on the fixture engine,
``tests/test_adversarial_mnn.py`` on a real tree): a case's record against its expectation, and that nothing
is left behind."""

from __future__ import annotations

import hashlib
from pathlib import Path

import polars as pl
from corpus import HOST_SECRET, Case


def hash_dir(d: Path) -> dict[str, str]:
    """sha256 of every file under ``d`` (relative path → hex), converted models aside (made per task)."""
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file() and p.parent.name != "models"}


def processes_naming(marker: str) -> list[str]:
    """Live processes whose command line names ``marker`` (a test's temporary paths): their command lines."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmd:
                out.append(cmd[:200])
    return out


def check_case(records: pl.DataFrame, case: Case, real: bool = False) -> None:
    """``case``'s one record has its expected status, error kind, flags and reason (AssertionError naming the
    case and what it got otherwise); ``real``: run by the kit's runner on a real MNN tree (``case.real`` then)."""
    rows = records.filter(pl.col("sample_id") == case.name).to_dicts()
    assert len(rows) == 1, f"{case.name}: {len(rows)} records"
    r = rows[0]
    want = case.real if real and case.real is not None else case.expect
    statuses = (want.status,) if isinstance(want.status, str) else want.status
    why = f"{case.name}: {r['status']}/{r['error_kind']}: {r['error_message'][:600]}"
    assert r["status"] in statuses, why
    if want.error_kind is not None:
        assert r["error_kind"] == want.error_kind, why
    codes = {f["code"] for f in r["flags"] or []}
    assert set(want.flags) <= codes, (why, codes)
    if want.reason:
        texts = [r["error_message"]] + [f["reason"] for f in r["flags"] or []]
        assert any(want.reason in t for t in texts), why


def check_nothing_left(cases: tuple[Case, ...] | list[Case], records: pl.DataFrame, ws, tmp: Path,
                       native_dir: Path, native_before: dict[str, str]) -> None:
    """No path a case tried to leave exists, no process names ``tmp``, the workspace ``ws``'s sources are the
    pristine tree's with nothing planted in its build, the native baseline is byte-identical, no record carries
    the host secret, and error messages are bounded."""
    from kit.mnn.source import tree_digest

    for case in cases:
        for path in case.leaves:
            assert not Path(path).exists(), f"{case.name} left {path}"
    assert not processes_naming(str(tmp)), processes_naming(str(tmp))
    assert tree_digest(ws.src) == ws.pristine.digest  # the workspace's sources are the pristine tree's
    assert not list(ws.src.rglob("*.planted")) and not list(ws.build.rglob("*.planted"))
    assert hash_dir(native_dir) == native_before
    assert HOST_SECRET not in str(records.to_dicts())
    assert all(len(m) <= 4000 for m in records["error_message"])  # what a flood of stderr leaves is bounded
