"""``mkb tasks tolerances``: derive every task's tolerance (:mod:`kit.suite.tolerance`), print it beside the task's
own and the paper's, and with ``--write`` put it into the task folders (``--record``: the built-in suite's record).

Exit 0; 2 on a task folder that does not load or without torch (the ``tasks`` extra).
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import sys
from pathlib import Path


def _native_errors(tasks_dir: Path) -> dict[str, float]:
    """Task id -> the wheel's native max abs error of the suite's last audit (``calibration.csv``), where known."""
    path = tasks_dir / "calibration.csv"
    if not path.is_file():
        return {}
    with open(path, encoding="utf-8") as f:
        return {r["task_id"]: float(r["native_max_abs_err"]) for r in csv.DictReader(f) if r.get("native_max_abs_err")}


def _table(rows: list[tuple], native: dict[str, float]) -> None:
    from rich.console import Console
    from rich.table import Table

    cols = ("task_id", "op", "K", "truth", "worst ref err", "atol (now)", "rtol (now)", "atol (derived)",
            "rtol (derived)", "paper", "native err (audit)", "note")
    table = Table(title=f"derived tolerances of {len(rows)} tasks")
    for c in cols:
        table.add_column(c)
    for task, d in rows:
        worst = max(d.errors.values(), default=None)
        nat = native.get(task.id)
        over = ""
        if nat is not None and d.atol is not None and nat > d.atol + d.rtol * d.scale:
            over = " (over)"  # beyond what the tolerance allows even at the largest |y|: the audit says exactly
        table.add_row(task.id, task.op_type, str(d.k), d.truth.split(" (")[0], "" if worst is None else f"{worst:.2g}",
                      f"{task.tolerance.atol:g}", f"{task.tolerance.rtol:g}",
                      "" if d.atol is None else f"{d.atol:g}", "" if d.rtol is None else f"{d.rtol:g}",
                      f"{task.tolerance.paper_atol:g}", "" if nat is None else f"{nat:.2g}{over}", d.note)
    Console(width=240).print(table)


def run(args: argparse.Namespace) -> int:
    """``mkb tasks tolerances --dir DIR [--ids ...] [--write] [--record FILE]``."""
    from rich.progress import Progress

    from kit.suite import tolerance
    from kit.suite.tasks import TaskError, load_suite

    if importlib.util.find_spec("torch") is None:
        print("mkb: deriving tolerances needs torch (the kit's tasks extra: pip install -e '.[tasks]')",
              file=sys.stderr)
        return 2
    try:
        tasks = load_suite(args.dir, ids=args.ids or None)
    except TaskError as exc:
        print(f"mkb: {exc}", file=sys.stderr)
        return 2
    if not tasks:
        print(f"mkb: --dir {args.dir}: no task folders in it (mkb tasks generate or mkb tasks import writes them)",
              file=sys.stderr)
        return 2
    rows = []
    with Progress(transient=True) as prog:
        bar = prog.add_task("derive", total=len(tasks))
        for task in tasks:
            prog.update(bar, description=f"derive {task.id}")
            rows.append((task, tolerance.derive(task)))
            prog.advance(bar)
    _table(rows, _native_errors(args.dir))
    derived = [d for _, d in rows if d.atol is not None]
    print(f"derived {len(derived)} of {len(rows)} tasks' tolerances (the others have no float output or do not run)")
    if args.write:
        n = sum(tolerance.write(task, d) for task, d in rows)
        print(f"wrote {n} task.toml [tolerance] tables and their hashes in {args.dir / 'manifest.json'}; "
              f"run mkb tasks audit --dir {args.dir} again: its marks were made with the former tolerances")
    if args.record is not None:
        Path(args.record).write_text(tolerance.dumps_record([d for _, d in rows]), encoding="utf-8")
        print(f"recorded {len(derived)} derivations in {args.record} (mkb tasks generate writes them into task.toml)")
    return 0


def add_parser(tsub) -> None:  # noqa: ANN001 - argparse's subparsers action
    q = tsub.add_parser("tolerances", help="derive every task's tolerance from independent references and its "
                        "accumulation length (needs the tasks extra: torch)")
    q.add_argument("--dir", type=Path, default=Path("tasks"))
    q.add_argument("--ids", nargs="*", default=None)
    q.add_argument("--write", action="store_true", help="write the derived tolerances into each task.toml "
                   "(and the task.toml hashes of manifest.json)")
    q.add_argument("--record", type=Path, default=None, help="also write them as the built-in suite's record "
                   "(kit/suite/tolerances.toml, which mkb tasks generate reads)")
