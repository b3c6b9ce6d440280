"""``mkb``: the kit's command line.

    mkb eval --config cfg.toml [--timing.iterations 200 ...]   evaluate every candidate of the config
    mkb generate --config cfg.toml                              a model's answers ([generate]) as a JSONL source
    mkb refine --config cfg.toml                                answer, evaluate, feedback, answer again ([refine])
    mkb check --task ID --files A.hpp A.cpp | --response R.md   one candidate, JSON verdict on stdout ([--no-timing])
    mkb serve --config cfg.toml [--host H] [--port P]           verdicts over HTTP for agents and trainers
    mkb calibrate --config cfg.toml                             the native method on a split (A/A noise floor)
    mkb calibrate --config cfg.toml --between-runs DIR...       the between-run sd of separate calibrations/runs
    mkb tasks list|generate|audit|tolerances                    the task suite
    mkb tasks import SRC... --out DIR [--official]              problem files / ONNX models -> task folders
    mkb tasks import --official DIR --per-category 1 --out OUT  one pinned file per category (or --only NAME...)
    mkb prompts --config cfg.toml --out DIR                     the initial prompt of every task
    mkb merge RUN_DIR / mkb report RUN_DIR [RUN_DIR ...]        tables and reports
    mkb bundle RUN_DIR [--out FILE]                             one archive of a run, for a reviewer
    mkb validate BUNDLE                                         check a bundle: hashes, records, metrics
    mkb reproduce BUNDLE [--run-dir DIR] [overrides]            run a bundle again here, compare, verdict
    mkb baselines list [--fingerprint F] / show KEY             native op times per hardware fingerprint

Options after the command's own ones are configuration overrides in dotted form, parsed by
pydantic-settings (``--verify.trials 3``).  Exit codes: 0 success, 1 failures found (audit, check of a bad
candidate), 2 invalid configuration or usage.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from kit.settings.config import ConfigError, EvalConfig, load_config


def _config(args: argparse.Namespace, rest: Sequence[str]) -> EvalConfig:
    return load_config(args.config, rest)


def _add_config(p: argparse.ArgumentParser, required: bool = False) -> None:
    p.add_argument("--config", type=Path, required=required, help="TOML config file (see configs/)")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="mkb", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("eval", help="evaluate all candidates of a config (resumable)")
    _add_config(p, required=True)

    p = sub.add_parser("generate", help="ask the model of [generate] for every missing sample (a JSONL source)")
    _add_config(p, required=True)

    p = sub.add_parser("refine", help="iterative refinement: answer, evaluate, feedback, next answer ([refine])")
    _add_config(p, required=True)

    p = sub.add_parser("check", help="evaluate one candidate and print a JSON verdict")
    _add_config(p)
    p.add_argument("--task", required=True, help="task id")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--files", nargs="+", type=Path, help="candidate files (basenames must be allowed by the task)")
    g.add_argument("--response", type=Path, help="a raw LLM response (code blocks whose first line names the file)")
    p.add_argument("--no-timing", action="store_true",
                   help="correctness only: build and verify, no timing (as --timing.enabled false)")

    p = sub.add_parser("calibrate", help="run the native method on every task of the split")
    _add_config(p, required=True)
    p.add_argument("--between-runs", nargs="+", type=Path, default=None, metavar="DIR",
                   help="time nothing: estimate the between-run sd from these separate runs (mkb calibrate's run "
                        "directories or calibration.json files, mkb eval run directories of the same candidates) and "
                        "this config's run.dir, and write it into run.dir's calibration.json")

    from kit.outline.tasks_cli import add_parser as add_tasks

    add_tasks(sub)
    p = sub.add_parser("prompts", help="write the initial prompt of every task (JSONL + one file per task)")
    _add_config(p)
    p.add_argument("--out", type=Path, required=True)

    p = sub.add_parser("merge", help="merge a run's shards into results.parquet")
    p.add_argument("run_dir", type=Path)

    p = sub.add_parser("report", help="HTML/Markdown/JSON/CSV report of one or more runs")
    p.add_argument("run_dirs", type=Path, nargs="+")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: <first run>/report)")
    p.add_argument("--tasks-dir", type=Path, default=None,
                   help="the task suite the runs were scored on (default: the first run's tasks.dir from its "
                        "provenance.json when that folder exists, else ./tasks)")
    p.add_argument("--score-native-incorrect", action="store_true",
                   help="score fast_p also on tasks the audit marked native_incorrect (report.score_native_incorrect)")
    _add_bundle(sub)
    from kit.serve.cli import add_parser as add_serve

    add_serve(sub)
    from kit.baselines.cli import add_parser as add_baselines

    add_baselines(sub)
    return ap


def _add_bundle(sub) -> None:  # noqa: ANN001 - argparse's private subparsers type
    p = sub.add_parser("bundle", help="one archive of a run: records, metrics, candidates, tasks, provenance")
    p.add_argument("run_dir", type=Path)
    p.add_argument("--out", type=Path, default=None, help="the archive (.tar.gz, or .zip; default: "
                                                           "RUN_DIR/bundle.tar.gz)")
    p.add_argument("--tasks-dir", type=Path, default=None, help="the suite the run was scored on (default: the "
                                                                "one its provenance.json recorded)")
    p = sub.add_parser("validate", help="check a bundle (hashes, one record per job, schema, metrics)")
    p.add_argument("bundle", type=Path)
    p = sub.add_parser("reproduce", help="evaluate a bundle's candidates again here and compare (verdict)")
    p.add_argument("bundle", type=Path)
    p.add_argument("--run-dir", type=Path, default=None,
                   help="where the reproduction's records go (default: runs/reproduce-<bundle name>)")
    p.add_argument("--tasks-dir", type=Path, default=None,
                   help="tasks to run on, checked against the bundle's hashes (default: the bundle's own)")


def main(argv: Sequence[str] | None = None) -> int:
    ap = build_parser()
    args, rest = ap.parse_known_args(argv)
    takes_overrides = args.cmd in ("eval", "generate", "refine", "check", "calibrate", "prompts", "reproduce",
                                   "serve")
    if rest and not takes_overrides:
        ap.error(f"unrecognized arguments: {' '.join(rest)}")
    _log_records_when_no_progress_bar()
    try:
        return _dispatch(args, rest)
    except ConfigError as exc:
        print(f"mkb: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # what finished is recorded (each record is written as it arrives): the same command resumes
        print(f"mkb: interrupted; run the same `mkb {args.cmd}` again to resume", file=sys.stderr)
        return 130


class _StderrHandler(logging.StreamHandler):
    """A log handler writing to whatever ``sys.stderr`` is at the time of each record (not the stream of
    the first call: ``main`` called again in one process, as tests do, may have another stderr)."""

    @property  # type: ignore[override]
    def stream(self):  # noqa: ANN201
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:  # noqa: ANN001
        pass


def _log_records_when_no_progress_bar() -> None:
    """Without a live progress bar (stderr not a terminal: nohup, CI, a cluster job), print the kit's
    INFO log (one line per record, workers ready, retries) to stderr instead."""
    from kit.host.progress import progress_shown

    log = logging.getLogger("kit")
    if not progress_shown() and not log.handlers:
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)


def _dispatch(args: argparse.Namespace, rest: Sequence[str]) -> int:
    try:
        return _COMMANDS[args.cmd](args, rest)
    except _user_errors() as exc:
        print(f"mkb: {exc}", file=sys.stderr)
        return 2


def _eval(args: argparse.Namespace, rest: Sequence[str]) -> int:
    cfg = _config(args, rest)
    from kit.outline.evaluate import evaluate

    if cfg.refine is not None:  # a model refined with the kit's feedback: mkb refine is the evaluation
        from kit.outline.refine import refine

        return refine(cfg)
    if cfg.generate is not None:  # the model's missing answers first, then they are a candidate source
        from kit.generate.batch import generate, with_answers

        print(generate(cfg).line(), file=sys.stderr)
        cfg = with_answers(cfg)
    return evaluate(cfg)


def _refine(args: argparse.Namespace, rest: Sequence[str]) -> int:
    from kit.outline.refine import refine

    return refine(_config(args, rest))


def _generate(args: argparse.Namespace, rest: Sequence[str]) -> int:
    from kit.generate.batch import generate

    summary = generate(_config(args, rest))
    print(summary.line())
    return 1 if summary.failed else 0


def _check(args: argparse.Namespace, rest: Sequence[str]) -> int:
    cfg = _config(args, [*rest, "--timing.enabled", "false"] if args.no_timing else rest)
    from kit.outline.evaluate import check

    verdict = check(cfg, args.task, files=args.files, response=args.response)
    print(json.dumps(verdict, indent=2))
    return 0 if verdict["status"] == "ok" else 1


def _serve(args: argparse.Namespace, rest: Sequence[str]) -> int:
    from kit.serve.cli import run as serve

    return serve(args, _config(args, rest))


def _calibrate(args: argparse.Namespace, rest: Sequence[str]) -> int:
    cfg = _config(args, rest)
    from kit.outline.calibrate import CalibrationError, calibrate, combine

    if not args.between_runs:
        return calibrate(cfg)
    try:
        return combine(cfg, args.between_runs)
    except CalibrationError as exc:
        print(f"mkb: {exc}", file=sys.stderr)
        return 2


def _tasks(args: argparse.Namespace, rest: Sequence[str]) -> int:
    from kit.outline.tasks_cli import run as run_tasks

    return run_tasks(args)


def _prompts(args: argparse.Namespace, rest: Sequence[str]) -> int:
    from kit.suite.prompts import write_prompts
    from kit.suite.tasks import load_suite

    cfg = _config(args, rest)
    if cfg.mnn.source_dir is None:
        raise ConfigError("mnn.source_dir: prompts read MNN headers from a tree; set it (or MKB_MNN__SOURCE_DIR)")
    tasks = load_suite(cfg.tasks.dir, cfg.tasks.split, cfg.tasks.ids or None)
    write_prompts(tasks, cfg.mnn.source_dir, args.out)
    print(f"wrote {len(tasks)} prompts to {args.out}")
    return 0


def _baselines(args: argparse.Namespace, rest: Sequence[str]) -> int:
    from kit.baselines.cli import run as baselines

    return baselines(args)


def _merge(args: argparse.Namespace, rest: Sequence[str]) -> int:
    from kit.results.shards import merge

    print(merge(args.run_dir))
    return 0


def _report(args: argparse.Namespace, rest: Sequence[str]) -> int:
    from kit.report import build_report
    from kit.score.metrics import NativeRule
    from kit.suite.nativemarks import read_marks
    from kit.suite.tasks import load_suite

    out = args.out or (args.run_dirs[0] / "report")
    tasks_dir = _report_tasks_dir(args)
    paths = build_report(list(args.run_dirs), out, load_suite(tasks_dir),
                         native=NativeRule(read_marks(tasks_dir), args.score_native_incorrect))
    print(f"report: {paths.html}\nmarkdown: {paths.markdown}\njson: {paths.json}\ncsv: {paths.csv}")
    return 0


def _bundle(args: argparse.Namespace, rest: Sequence[str]) -> int:
    """``mkb bundle`` (0), ``mkb validate`` (0 valid, 1 rejected: every problem named) and ``mkb reproduce`` (0
    reproduced, 1 a real difference, named)."""
    if args.cmd == "bundle":
        from kit.bundle.pack import make_bundle

        print(f"bundle: {make_bundle(args.run_dir, args.out, args.tasks_dir)}")
        return 0
    if args.cmd == "validate":
        from kit.bundle.validate import validate

        checked = validate(args.bundle)
        if not checked.ok:
            print(f"mkb validate: {args.bundle} is REJECTED, {len(checked.problems)} problem(s):", file=sys.stderr)
            for problem in checked.problems:
                print(f"  {problem}", file=sys.stderr)
            return 1
        m = checked.manifest
        assert m is not None
        print(f"{args.bundle}: valid ({m.n_records} records of config {m.config_digest}, {len(m.files)} files "
              f"hashed, {len(m.tasks)} tasks, every job's record and the metrics recomputed equal)")
        return 0
    from kit.bundle.reproduce import reproduce

    return 0 if reproduce(args.bundle, args.run_dir, rest, args.tasks_dir).matches else 1


def _report_tasks_dir(args: argparse.Namespace) -> Path:
    """``--tasks-dir``, else the first run's tasks folder as its sessions recorded it (provenance.json; the
    absolute path, or the config's ``tasks.dir`` of an older run) when that is a folder, else ./tasks.

    Raises:
        kit.report.ReportError: a run folder does not exist.
        kit.suite.tasks.TaskError: no tasks folder (names the paths tried, absolute, and the option)."""
    from kit.report import ReportError
    from kit.run import provenance
    from kit.suite.tasks import TaskError

    for run_dir in args.run_dirs:
        if not run_dir.is_dir():
            raise ReportError(f"{run_dir}: no such run directory")
    if args.tasks_dir is not None:
        tried = [args.tasks_dir]
    else:
        try:
            prov = provenance.load(args.run_dirs[0])
        except provenance.ProvenanceError:
            prov = None  # the report itself names the damaged file
        recorded = prov.recorded_task_dirs() if prov is not None else []
        config_dir = prov.config_tasks_dir() if prov is not None else None
        if not recorded and config_dir is not None:
            recorded = [config_dir]
        tried = [Path(d) for d in dict.fromkeys(recorded)] + [Path("tasks")]
    for tasks_dir in tried:
        if tasks_dir.is_dir():
            return tasks_dir
    shown = ", ".join(str(d.absolute()) for d in tried)
    raise TaskError(f"--tasks-dir: {shown} {'is' if len(tried) == 1 else 'are'} not a folder (the task suite the "
                    f"runs were scored on; pass --tasks-dir DIR)")


def _user_errors() -> tuple[type[BaseException], ...]:
    """Errors that mean "fix your input or setup": printed without a traceback, exit code 2."""
    from kit.baselines.cli import BaselinesUsageError
    from kit.baselines.table import TableError
    from kit.bundle.manifest import BundleError
    from kit.candidates import CandidateSourceError
    from kit.devices.errors import DeviceError
    from kit.generate.lines import GenerateError
    from kit.host.sandbox import SandboxError
    from kit.mnn.native import NativeBuildError
    from kit.mnn.source import SourceError
    from kit.report import ReportError
    from kit.results.shards import ShardError
    from kit.run.provenance import ProvenanceError
    from kit.score.metrics import MetricsError
    from kit.suite.prompts import PromptError
    from kit.suite.tasks import TaskError

    errors: tuple[type[BaseException], ...] = (
        TaskError, CandidateSourceError, SourceError, NativeBuildError, PromptError, ProvenanceError,
        ReportError, MetricsError, ShardError, FileNotFoundError, BundleError, DeviceError, BaselinesUsageError,
        TableError, SandboxError, GenerateError)
    dispatch = sys.modules.get("kit.dispatch")  # only a run that imported it (and Ray) can raise its error
    if dispatch is not None:
        errors += (dispatch.DispatchError,)
    return errors


#: each subcommand's handler: (its arguments, the config overrides left over) -> exit status
_COMMANDS: dict[str, Callable[[argparse.Namespace, Sequence[str]], int]] = {
    "eval": _eval, "refine": _refine, "generate": _generate, "check": _check, "serve": _serve,
    "calibrate": _calibrate, "tasks": _tasks, "prompts": _prompts, "bundle": _bundle, "validate": _bundle,
    "reproduce": _bundle, "baselines": _baselines, "merge": _merge, "report": _report,
}


if __name__ == "__main__":
    sys.exit(main())
