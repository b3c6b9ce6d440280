"""``mkb tasks``: list, generate, audit (with the pinned tree's native build), derive tolerances and import the
task suite; the parser of the command group (:func:`add_parser`) and its handler (:func:`run`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parser(sub) -> None:  # noqa: ANN001 - argparse's private subparsers type
    """Add ``tasks`` and its sub-commands to ``sub``."""
    p = sub.add_parser("tasks", help="the task suite")
    tsub = p.add_subparsers(dest="tasks_cmd", required=True)
    q = tsub.add_parser("list", help="list tasks")
    q.add_argument("--dir", type=Path, default=Path("tasks"))
    q.add_argument("--split", choices=["train", "test", "all"], default="all")
    q.add_argument("--category", default=None)
    q = tsub.add_parser("generate", help="(re)generate every task folder and the manifest")
    q.add_argument("--dir", type=Path, default=Path("tasks"))
    q = tsub.add_parser("audit", help="audit every task (needs the tasks extra: torch)")
    q.add_argument("--dir", type=Path, default=Path("tasks"))
    q.add_argument("--ids", nargs="*", default=None)
    q.add_argument("--no-native", action="store_true", help="skip the native MNN (PyPI wheel) check")
    q.add_argument("--no-torch", action="store_true", help="skip the PyTorch fidelity check")
    q.add_argument("--config", type=Path, default=None,
                   help="an eval config: also run every task on its pinned tree's native build and mark the tasks "
                        "native gets wrong native_incorrect in the manifest")
    q.add_argument("--no-pinned", action="store_true", help="skip the pinned tree's native check (with --config)")

    from kit.suite.tolerance_cli import add_parser as _add_tolerances

    _add_tolerances(tsub)
    _add_import(tsub)


def _add_import(tsub) -> None:  # noqa: ANN001 - argparse's private subparsers type
    q = tsub.add_parser("import", help="import problem files / ONNX models as task folders (needs torch)")
    q.add_argument("sources", nargs="*", type=Path, help="problem .py files, .onnx models, folders of them")
    q.add_argument("--out", type=Path, required=True, help="new or empty folder for the task folders")
    q.add_argument("--official", action="store_true",
                   help="the paper's pinned 190 files: SRC is a checkout of the pinned folder (hashes checked)")
    q.add_argument("--download", type=Path, default=None, metavar="CACHE",
                   help="with --official and no SRC: download the pinned commit into CACHE (needs network)")
    q.add_argument("--only", nargs="+", action="extend", default=None, metavar="NAME",
                   help="with --official: just these pinned files (Binary/Mul.py or Binary/Mul; each hash checked)")
    q.add_argument("--per-category", type=int, default=None, metavar="N",
                   help="with --official: N pinned files of each of the 12 categories, spread over the category's "
                        "files in name order (1: the middle one); with --only: both")
    q.add_argument("--jobs", type=int, default=1, help="sources built at once (each export is its own process)")
    q.add_argument("--budget-mib", type=float, default=None,
                   help="inputs + parameters + outputs per task, larger problems are scaled down (MiB; default 64, "
                        "--official 1024: the paper's shapes are kept)")
    q.add_argument("--memory-limit-gib", type=float, default=8.0, help="address-space limit of each export (GiB)")
    q.add_argument("--widen-inputs", action="store_true",
                   help="make float input ranges symmetric around zero and index ranges cover negative indices")
    q.add_argument("--dim", action="append", type=_dim_arg, default=[], metavar="NAME=N",
                   help="fix the dynamic dimension NAME (its dim_param) of an ONNX model's inputs to N (repeatable)")
    q.add_argument("--tolerance", type=float, default=None,
                   help="atol = rtol of every imported task (default 1e-2, the paper's pipelines' tolerance)")
    q.add_argument("--id-prefix", default=None, help="prefix of every task id (--official: 'paper_')")
    q.add_argument("--mnn-dir", type=Path, default=None, help="MNN tree: converter files of ops the suite lacks")
    q.add_argument("--converter", type=Path, default=None, help="MNNConvert (3.2.2) for the native observation "
                                                                 "(default: the PyPI wheel's converter)")
    q.add_argument("--no-native", action="store_true", help="do not observe the native conversion")
    q.add_argument("--resume", action="store_true", help="continue an interrupted import into --out")
    q.add_argument("--retry", action="store_true", help="as --resume, and try the left-out sources again")
    q.add_argument("--n-test", type=int, default=None, help="test tasks of the split (default 40/190 of them)")


def _dim_arg(text: str) -> tuple[str, int]:
    """``--dim NAME=N`` -> (NAME, N); argparse says the error, naming the flag (exit 2)."""
    from kit.suite.importer.cli import parse_dim

    try:
        return parse_dim(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _audit_table(df) -> None:  # noqa: ANN001 - a polars DataFrame
    from rich.console import Console
    from rich.table import Table

    cols = ("task_id", "passed", "ort_ms", "torch_ok", "mutants_ok", "native_ok", "native_max_abs_err",
            "pinned_ok", "pinned_max_abs_err", "atol", "tol_method", "native_tol_ratio", "paper_atol",
            "pinned_err_over_atol", "pinned_edges_failed", "problems")
    table = Table(title=f"audit of {df.height} tasks")
    for col in cols:
        table.add_column(col)
    for r in df.iter_rows(named=True):
        table.add_row(*("" if r.get(c) is None else (f"{r[c]:.3g}" if isinstance(r[c], float) else str(r[c]))
                        for c in cols))
    Console(width=240).print(table)


def _over_tolerance(df) -> None:  # noqa: ANN001 - a polars DataFrame of the audit
    """Say which tasks' native error exceeds the task's tolerance (the wheel's, the pinned build's), and whether
    native passes at the paper's tolerance there."""
    import polars as pl

    over = df.filter(pl.col("native_over_tolerance").fill_null(False))
    if over.height:
        within = over.filter(pl.col("native_ok_at_paper").fill_null(False))["task_id"].to_list()
        print(f"native MNN (PyPI wheel) error exceeds the task's tolerance on {over.height} task(s): "
              + ", ".join(f"{r['task_id']} ({r['native_tol_ratio']:.3g}x, {r['tol_method'] or 'unstated'})"
                          for r in over.iter_rows(named=True))
              + f"; within the paper's tolerance on {len(within)}" + (": " + ", ".join(within) if within else ""))
    if "pinned_over_tolerance" in df.columns:
        pinned = df.filter(pl.col("pinned_over_tolerance").fill_null(False))["task_id"].to_list()
        if pinned:
            print(f"pinned native MNN's error exceeds the task's tolerance on {len(pinned)} task(s): "
                  + ", ".join(pinned))


def _tasks_audit(args: argparse.Namespace) -> int:
    """``mkb tasks audit``: the audit (:mod:`kit.suite.audit`), with ``--config`` also on the pinned tree's native
    build (:mod:`kit.outline.taskaudit`), whose failures are marked ``native_incorrect`` in the manifest."""
    import polars as pl
    from rich.progress import Progress

    from kit.outline.taskaudit import audit_with_pinned, mark
    from kit.suite.audit import failed, write_calibration
    from kit.suite.importer.weak import is_imported, mark_weak, split_failures

    cfg = None
    if args.config is not None and not args.no_pinned:
        from kit.settings.config import load_config

        cfg = load_config(args.config)
    with Progress(transient=True) as prog:
        bar = prog.add_task("audit", total=None)

        def tick(task_id: str, done: int, total: int) -> None:
            prog.update(bar, completed=done, total=total, description=f"audit {task_id}")

        df = audit_with_pinned(args.dir, cfg, args.ids or None, wheel=not args.no_native,
                               torch_check=not args.no_torch, progress=tick)
    if not args.ids:
        write_calibration(df, args.dir)
    _audit_table(df)
    natives = df.filter(pl.col("native_ok").not_()).height
    print(f"native MNN (PyPI wheel) fails {natives} task(s): recorded facts, not audit failures")
    _over_tolerance(df)
    if cfg is not None:
        n = mark(args.dir, df, cfg.mnn.version)
        wrong = df.filter(pl.col("native_incorrect").fill_null(False))["task_id"].to_list()
        print(f"pinned native MNN {cfg.mnn.version} disagrees with ONNX Runtime on {len(wrong)} task(s)"
              + (": " + ", ".join(wrong) if wrong else "") + f"; marked native_incorrect in the manifest: {n}")
    bad = failed(df)
    if is_imported(args.dir):  # an imported suite: weak tasks are marked in its manifest, not failures
        bad, weak = split_failures(bad)
        n_weak = mark_weak(args.dir, df)
        print(f"weak (a zero/constant/identity kernel passes; marked in manifest.json): {n_weak} task(s)"
              + (": " + ", ".join(t for t, _ in weak) if weak else ""))
    if bad:
        for tid, problems in bad:
            print(f"FAIL {tid}: {problems}", file=sys.stderr)
        print(f"audit: {len(bad)} task(s) fail a check", file=sys.stderr)
        return 1
    print(f"audit: all {df.height} tasks pass every check except the recorded native-MNN facts"
          + (" and the marked weak tasks" if is_imported(args.dir) else ""))
    return 0


def run(args: argparse.Namespace) -> int:
    """Run the ``mkb tasks`` sub-command of ``args``; its exit status."""
    from rich.console import Console
    from rich.table import Table

    if args.tasks_cmd == "generate":
        from kit.suite.builtin import generate

        generate(args.dir)
        print(f"generated the task suite in {args.dir}")
        return 0
    if args.tasks_cmd == "import":
        from kit.suite.importer.cli import run_import

        return run_import(args)
    if args.tasks_cmd == "list":
        from kit.suite.listing import list_tasks

        rows = list_tasks(args.dir, args.split, args.category)
        table = Table(title=f"{len(rows)} tasks (split: {args.split})")
        cols = ("id", "category", "op_type", "mechanism", "split", "inputs", "mnn_op_types")
        for col in cols:
            table.add_column(col)
        for r in rows:
            table.add_row(*(str(r[c]) for c in cols))
        Console(width=220).print(table)
        return 0
    if args.tasks_cmd == "audit":
        return _tasks_audit(args)
    if args.tasks_cmd == "tolerances":
        from kit.suite.tolerance_cli import run

        return run(args)
    raise AssertionError(args.tasks_cmd)
