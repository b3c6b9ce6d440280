"""CI's check of the README's main command after it ran (``.ci/run``): every record's status against
``candidates/expected.toml`` (``tests/sample_expected.py``), the report written, and how long the native build
took (``build_s`` in the native baseline's ``meta.json``, else the last ``native MNN build: ...`` line of the
eval log).

    python .ci/check_main.py --config configs/default.toml [--log EVAL_LOG]

Run it with the HOME (and MKB_* variables) the main command ran with: the kit's cache is found as the command
found it.  Prints what it found; exits 0 when the statuses are as expected and the report exists, else 1."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from sample_expected import expected_statuses, status_differences  # noqa: E402

#: a BuildProgress log line of the native build (kit/host/progress.py), e.g. ``native MNN build: 844/844 steps (100 %),
#: 12 min 5 s``; a Ray worker prefixes its pid
_BUILD_LINE = re.compile(r"native MNN build: (\d+)/(\d+) steps \((\d+) %\), (?:(\d+) h (\d+) min|(\d+) min (\d+) s|(\d+) s)")


def log_build_s(text: str) -> tuple[float, int] | None:
    """(seconds, steps) of the last native-build progress line of an eval log, or None (whole seconds; a build
    logs every 5 %, so the last line is its end)."""
    last = None
    for m in _BUILD_LINE.finditer(text):
        last = m
    if last is None:
        return None
    h, hm, m, ms, s = (int(g) if g else 0 for g in last.groups()[3:])
    return float(h * 3600 + hm * 60 + m * 60 + ms + s), int(last.group(1))


def native_builds(cache_dir: Path) -> list[dict]:
    """The native baselines in the kit's cache: each ``native/<key>/meta.json`` (with ``key``), oldest first."""
    metas = sorted((cache_dir / "native").glob("*/meta.json"), key=lambda p: p.stat().st_mtime)
    return [{"key": p.parent.name, **json.loads(p.read_text())} for p in metas if (p.parent / "done").is_file()]


def duration(s: float) -> str:
    s = int(s)
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def build_time_line(builds: list[dict], arch: str, log_text: str) -> str:
    """One line: how long the native build for ``arch`` took, and where the figure comes from."""
    mine = [b for b in builds if b.get("arch", arch) == arch]
    timed = [b for b in mine if b.get("build_s") is not None]
    if timed:
        b = timed[0]  # the first one built: the main command's
        steps = f", {b['build_steps']} steps" if b.get("build_steps") is not None else ""
        return f"native build ({arch}, {b['key']}): {duration(b['build_s'])}{steps} (meta.json build_s)"
    from_log = log_build_s(log_text)
    if from_log is not None:
        return f"native build ({arch}): {duration(from_log[0])}, {from_log[1]} steps (the eval log's last progress line)"
    if mine:
        return f"native build ({arch}, {mine[-1]['key']}): time not recorded (no build_s, no progress line in the log)"
    return f"native build ({arch}): none in the cache"


def list_baselines(builds: list[dict]) -> int:
    """Print each native baseline; a second one for the same (arch, static) means a test did not reuse the
    first (another tree digest, compiler or CMake arguments: a warning, not a failure).  Returns 0."""
    seen: dict[tuple, str] = {}
    for b in builds:
        took = duration(b["build_s"]) if b.get("build_s") is not None else "time not recorded"
        print(f"native baseline {b['key']}: {b.get('arch', '?')}{' static' if b.get('static') else ''}, "
              f"tree {str(b.get('tree_digest', '?'))[:16]}, {took}")
        kind = (b.get("arch"), bool(b.get("static")))
        if kind in seen:
            print(f"WARNING: {b['key']} is a second native baseline for {kind[0]} beside {seen[kind]}: "
                  "something built MNN again instead of reusing the cache", file=sys.stderr)
        seen.setdefault(kind, b["key"])
    if not builds:
        print("no native baseline in the cache")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, required=True)
    ap.add_argument("--log", type=Path, default=None, help="the main command's output")
    ap.add_argument("--baselines", action="store_true",
                    help="only list the native baselines in the cache (after the tests: did they reuse the main "
                         "command's?); a second one for the same target is a warning")
    args = ap.parse_args(argv)

    import polars as pl

    from kit.settings.config import load_config

    cfg = load_config(args.config)
    arch = cfg.target.arch
    if args.baselines:
        return list_baselines(native_builds(cfg.mnn.cache_dir))
    log_text = args.log.read_text(errors="replace") if args.log and args.log.is_file() else ""
    print(build_time_line(native_builds(cfg.mnn.cache_dir), arch, log_text))
    ok = True
    results = cfg.run.dir / "results.parquet"
    if results.is_file():
        rows = pl.read_parquet(results).to_dicts()
        diffs = status_differences(rows, arch)
        expected = expected_statuses(arch)
        same = sum(expected.get(f"{r['task_id']}/{r['sample_id']}") == r["status"] for r in rows)
        for d in diffs:
            print(f"  {d}")
        print(f"statuses as expected ({arch}): {same}/{len(rows)} records, {len(expected)} expected"
              + ("" if not diffs else f"; {len(diffs)} difference(s)"))
        ok = not diffs and bool(rows)
    else:
        print(f"no {results}: the main command merged no records")
        ok = False
    report = cfg.run.dir / "report" / "report.html"
    if report.is_file() and report.stat().st_size > 0:
        print(f"report: {report} ({report.stat().st_size} bytes)")
    else:
        print(f"no report at {report}")
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
