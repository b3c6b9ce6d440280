"""``mkb tasks import``: arguments -> :func:`kit.suite.importer.import_sources`, a rich summary, exit status.

Exit 0 when at least one task was written (left-out sources are listed with their reasons), 2 on bad input
(a missing source, a checkout that differs from the pins, a non-empty --out) or without the ``tasks`` extra
(said once, before any file).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path


def _sources(args: argparse.Namespace):
    from kit.suite.importer import find_sources
    from kit.suite.importer.official import download, load_pins, official_sources, select

    only, per_category = getattr(args, "only", None), getattr(args, "per_category", None)
    if args.official:
        if len(args.sources) > 1:
            raise ValueError("--official takes one SRC: a checkout of the pinned folder")
        folders = [n for n in only or () if Path(n).is_dir()]
        if folders:
            raise ValueError(f"--only {folders[0]}: a folder, not a pinned file; give the checkout before --only "
                             "(mkb tasks import --official CHECKOUT --only Binary/Mul.py ... --out DIR)")
        pins = load_pins()
        chosen = select(pins, only, per_category) if only is not None or per_category is not None else None
        if args.sources:
            root = args.sources[0]
        elif args.download is not None:
            root = download(args.download)
        else:
            raise ValueError("--official needs SRC (a checkout of the pinned folder) or --download CACHE")
        return official_sources(root, pins, chosen), pins.id_prefix
    if only is not None or per_category is not None:
        raise ValueError("--only and --per-category select files of the paper's pinned folder: add --official")
    if not args.sources:
        raise ValueError("give at least one SRC (problem file, .onnx model or folder)")
    return find_sources(list(args.sources)), ""


#: what an import needs beyond the kit's own dependencies (the ``tasks`` extra): the graph reduction for every
#: source, torch for problem files (their export)
EXTRA_MODULES = ("onnxscript", "onnx_ir")
TORCH_MODULES = ("torch",)


def missing_modules(sources) -> list[str]:  # noqa: ANN001 - a list of kit.suite.importer.assemble.Source
    """The modules of the ``tasks`` extra that importing ``sources`` needs and this Python lacks."""
    import importlib.util

    wanted = list(EXTRA_MODULES)
    if any(s.path.suffix == ".py" for s in sources):
        wanted += TORCH_MODULES
    return [m for m in wanted if importlib.util.find_spec(m) is None]


def parse_dim(text: str) -> tuple[str, int]:
    """``NAME=N`` (``--dim``) -> (NAME, N).

    Raises:
        ValueError: not NAME=N with a non-empty NAME and N a positive integer (the message names the flag).
    """
    name, sep, value = text.partition("=")
    if not sep or not name.strip() or not value.strip().isdigit() or int(value) <= 0:
        raise ValueError(f"--dim {text!r}: give NAME=N, NAME a dynamic dimension's name (dim_param) of an ONNX "
                         "model's input and N a positive integer (e.g. --dim N=8)")
    return name.strip(), int(value)


def check_dims(dims: list[tuple[str, int]], sources) -> dict[str, int]:  # noqa: ANN001 - Source list
    """``--dim`` pairs as a mapping, each name a dynamic dimension of some ONNX source's inputs.

    Raises:
        ValueError: a name given twice with two values, or one no ONNX source has (the message names the flag
            and the names the models have).
    """
    from kit.suite.importer.onnxsrc import dynamic_dims

    out: dict[str, int] = {}
    for name, n in dims:
        if out.get(name, n) != n:
            raise ValueError(f"--dim {name}: given twice ({out[name]} and {n})")
        out[name] = n
    if not out:
        return out
    have: set[str] = set()
    for src in sources:
        if src.path.suffix == ".onnx":
            have |= dynamic_dims(src.path)
    for name in out:
        if name not in have:
            raise ValueError(f"--dim {name}={out[name]}: no input of the ONNX models imported has a dimension named "
                             f"{name!r} (their named dynamic dimensions: {', '.join(sorted(have)) or 'none'})")
    return out


def _tolerance(args: argparse.Namespace) -> dict:
    """The Options fields of ``--tolerance`` (atol = rtol, with its reason), or none: the paper's default."""
    if getattr(args, "tolerance", None) is None:
        return {}
    return {"atol": args.tolerance, "rtol": args.tolerance,
            "tolerance_reason": f"given on the command line (mkb tasks import --tolerance {args.tolerance:g})",
            "tolerance_method": "given"}


def run_import(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from kit.suite.importer import Options, import_sources
    from kit.suite.importer.official import PinError
    from kit.suite.importer.problem import ImportFailure

    try:
        sources, prefix = _sources(args)
        dims = check_dims(getattr(args, "dim", None) or [], sources)
        missing = missing_modules(sources)
        if missing:  # said once, before any file (each one would fail on it)
            print(f"mkb: importing needs the kit's `tasks` extra, which this Python lacks ({', '.join(missing)} "
                  "not installed): pip install -e '.[tasks]' (torch==2.13.0, CPU build), or run the import as "
                  "nox -s import -- ...", file=sys.stderr)
            return 2
        budget_mib = args.budget_mib if args.budget_mib is not None else (1024.0 if args.official else 64.0)
        opts = Options(budget_bytes=int(budget_mib * (1 << 20)),
                       memory_limit_bytes=int(args.memory_limit_gib * (1 << 30)), widen_inputs=args.widen_inputs,
                       id_prefix=prefix if args.id_prefix is None else args.id_prefix, mnn_root=args.mnn_dir,
                       converter=args.converter, probe_native=not args.no_native, dims=tuple(sorted(dims.items())),
                       **_tolerance(args))
        with Progress(transient=True) as prog:
            bar = prog.add_task("import", total=len(sources))

            def tick(name: str, done: int, total: int) -> None:
                prog.update(bar, completed=done, description=f"import {name}")

            skip = "imported" if args.retry else "recorded" if args.resume else "none"
            report = import_sources(sources, args.out, opts, skip=skip, jobs=args.jobs, n_test=args.n_test,
                                    progress=tick)
    except (ValueError, PinError, ImportFailure, OSError) as exc:
        print(f"mkb: {exc}", file=sys.stderr)
        return 2
    console = Console(width=200)
    if report.left_out:
        table = Table(title=f"{len(report.left_out)} source(s) left out")
        for col in ("source", "kind", "reason"):
            table.add_column(col)
        for row in report.left_out:
            table.add_row(*row)
        console.print(table)
    kinds = Counter(k for _, k, _ in report.left_out)
    console.print(f"imported {len(report.imported)} of {len(sources)} into {args.out} "
                  f"(left out: {dict(kinds) or 'none'}); manifest: {Path(args.out) / 'manifest.json'}")
    console.print(f"next: mkb tasks audit --dir {args.out}  (marks weak tasks in the manifest)")
    return 0 if report.imported else 1
