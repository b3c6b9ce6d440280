"""The command line of ``python -m kit.bench`` (``nox -s bench``)."""

from __future__ import annotations

import argparse

import kit.bench
from kit.bench.adbcost import adb_cost
from kit.bench.checkscost import BEFORE, BEFORE_ADAPTIVE, SideBySideError, checks_cost, side_by_side
from kit.bench.clientcost import client_cost
from kit.bench.coldcache import cold_cache
from kit.bench.inputcheck import input_check_cost
from kit.bench.overhead import overhead
from kit.bench.sandboxcost import sandbox_cost
from kit.bench.scaling import scaling
from kit.bench.throughput import throughput
from kit.bench.timingcost import timing_cost


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m kit.bench", description=kit.bench.__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default=None, help="task id (default: fx_argmax on the fixture engine, "
                    "the sample set's ArgMax task on real MNN)")
    ap.add_argument("--sample", default="correct")
    ap.add_argument("--repeats", type=int, default=3, help="measurements (or evaluations) per side, at least 1 "
                    "(default 3)")
    ap.add_argument("--scaling", action="store_true", help="run the 1-vs-2-worker scaling benchmark instead")
    ap.add_argument("--sandbox-cost", action="store_true", help="run the sandbox cost benchmark instead: a "
                    "candidate through the pipeline with and without the sandbox")
    ap.add_argument("--timing-cost", action="store_true", help="run the timing/verification cost benchmark instead: "
                    "former vs current defaults per candidate")
    ap.add_argument("--adb-cost", action="store_true", help="run the adb executor's overhead benchmark instead: "
                    "one candidate's timing on the fake adb device through the kit vs its raw adb steps")
    ap.add_argument("--input-check-cost", action="store_true", help="run the input check's cost benchmark instead: "
                    "per checked forward, the kit's check that its inputs are drawn from the timed sets beside the "
                    "forward's comparison with ONNX Runtime (--tasks, default the sample set's tasks)")
    ap.add_argument("--checks-cost", action="store_true", help="run the cost benchmark of issue 26's checks "
                    "instead: the sample set by mkb eval with this kit and with the kit of --before, interleaved "
                    "(--repeats evaluations each)")
    ap.add_argument("--before", default=None, help=f"a commit of this repository (or 'default'). --checks-cost: the "
                    f"kit before issue 26's checks (default {BEFORE}). --throughput: run the sample set with this "
                    f"checkout and with that commit's kit side by side, each at its own default protocol, "
                    f"cache-cold, on as many Ray workers as the largest of --workers, interleaved, --repeats "
                    f"evaluations each after one warm-up per side (minutes); 'default' is {BEFORE_ADAPTIVE}, main "
                    f"before adaptive rounds")
    ap.add_argument("--copies", type=int, default=None, help="scaling: evaluate the sample set under this many "
                    "method names (default: 8 on the fixture engine, 1 on real MNN)")
    ap.add_argument("--one-worker-jobs", type=int, default=1, help="scaling: ninja -j of the serial and "
                    "1-worker runs (default 1, as each of the 2 workers: per-worker scaling)")
    ap.add_argument("--rounds", type=int, default=None, help="scaling: interleaved rounds of the three modes "
                    "(default: 3 on the fixture engine, 2 on real MNN)")
    ap.add_argument("--cold-cache", action="store_true", help="run the cache-cold benchmark instead: candidates "
                    "per hour warm vs cold (ccache-missing copies), x86_64 vs aarch64 (cross build, qemu)")
    ap.add_argument("--arch", action="append", default=None, help="cold cache: a target architecture (repeat; "
                    "default: x86_64 and aarch64)")
    ap.add_argument("--tasks", default=None, help="cold cache: comma-separated task ids (default: three tasks' "
                    "samples on real MNN, every fixture task)")
    ap.add_argument("--client-cost", action="store_true", help="run the generation client's overhead benchmark "
                    "instead: requests/s through the kit's layer vs raw openai calls, loopback server")
    ap.add_argument("--serve", action="store_true", help="run the service benchmark instead: verdicts per hour "
                    "through mkb serve vs mkb eval on the same candidates, one worker; POST-to-verdict p50/p95 "
                    "(--tasks, --rounds default 2, --repeats)")
    ap.add_argument("--ray-address", default=None, help="serve: run both modes on this Ray cluster (dispatch.address: "
                    "auto, HOST:PORT) instead of serially in this process")
    ap.add_argument("--throughput", action="store_true", help="run the throughput benchmark instead: candidates per "
                    "hour of the sample set at the default protocol, cache-cold, 1 and 2 workers, split by stage, "
                    "beside the same at the fewest timing rounds (2)")
    ap.add_argument("--workers", default="1,2", help="throughput: comma-separated worker counts (default 1,2)")
    ap.add_argument("--default-only", action="store_true", help="throughput: the default protocol alone")
    ap.add_argument("--serial", action="store_true", help="throughput: dispatch.mode = serial (one worker, no Ray)")
    ap.add_argument("--no-warm-up", action="store_true", help="throughput: no warm-up run first")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    try:
        workers = tuple(int(w) for w in args.workers.split(","))
    except ValueError:
        ap.error(f"--workers {args.workers!r}: comma-separated positive worker counts, e.g. 1,2")
    if min(workers) < 1 or args.repeats < 1:
        ap.error(f"--workers {args.workers!r} and --repeats {args.repeats} must be at least 1")
    return _run(ap, args, workers)


def _run(ap: argparse.ArgumentParser, args: argparse.Namespace, workers: tuple[int, ...]) -> int:
    """The benchmark ``args`` name (the first of its flags in this order; the overhead benchmark where none)."""
    if args.serve:
        from kit.bench.servecost import serve_cost  # FastAPI and uvicorn: the serve extra

        return serve_cost(args.tasks.split(",") if args.tasks else None, args.rounds or 4, args.repeats,
                          args.ray_address)
    if args.throughput and args.before:
        try:
            return side_by_side(args.repeats, BEFORE_ADAPTIVE if args.before == "default" else args.before, "own",
                                max(workers))
        except SideBySideError as exc:
            ap.error(str(exc))
    if args.throughput:
        throughput(workers, fewest=not args.default_only,
                   mode="serial" if args.serial else "ray", warm_up=not args.no_warm_up)
        return 0
    if args.client_cost:
        return client_cost(rounds=args.rounds or 3)
    if args.cold_cache:
        tasks = tuple(args.tasks.split(",")) if args.tasks else None
        return cold_cache(tuple(args.arch or ("x86_64", "aarch64")), args.rounds or 1, tasks)
    if args.checks_cost:
        try:
            return checks_cost(args.repeats, args.before or BEFORE)
        except SideBySideError as exc:
            ap.error(str(exc))
    if args.input_check_cost:
        return input_check_cost(tuple(args.tasks.split(",")) if args.tasks else None, args.repeats)
    if args.scaling:
        return scaling(args.copies, args.one_worker_jobs, args.rounds)
    if args.adb_cost:
        return adb_cost(args.task, args.repeats)
    if args.timing_cost:
        return timing_cost(args.task, args.repeats)
    if args.sandbox_cost:
        return sandbox_cost(args.task, args.repeats)
    return overhead(args.task, args.sample, args.repeats)
