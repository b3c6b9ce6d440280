"""The Ray executor of a run: connect to (or start) Ray, start the workers, run the pending jobs, stop.

:class:`RayExecutor` is what :func:`kit.outline.evaluate.evaluate` uses for ``dispatch.mode = "processes" | "ray"``:
it receives the pending jobs and gives every record to the run's sink; planning, resume, provenance files and
the summary are :mod:`kit.outline.evaluate`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kit.dispatch.actors import DEFAULT_JOB, DEFAULT_SETUP, DEFAULT_TIME, JobFn, SetupFn, TimeFn
from kit.dispatch.cluster import connect, shutdown, timer_nodes, worker_count
from kit.dispatch.driver import Driver
from kit.host.progress import StageTally, job_progress
from kit.job.record import Job
from kit.results.shards import RecordSink
from kit.run.plan import RunStats
from kit.run.provenance import SessionLog
from kit.settings.config import EvalConfig


class RayExecutor:
    """Runs jobs on Ray actors: ``min(dispatch.workers, CPUs)`` build workers (one CPU each; CPUs counted on the
    nodes that carry ``dispatch.build_resource``, else ``dispatch.timing_resource`` when set, and the actors
    then request ``0.01`` of that custom resource so they are placed only there), plus one timing worker per
    ``timing_resource`` node when build and timing nodes are apart (``dispatch.build_resource``).

    A context manager: entering connects to Ray (:func:`kit.dispatch.cluster.connect`), leaving the outermost
    ``with`` shuts down a Ray instance it started.  ``setup_fn``, ``job_fn`` and ``time_fn`` replace the workers' set-up and job
    halves (tests and benchmarks inject their own)."""

    def __init__(self, cfg: EvalConfig, *, setup_fn: SetupFn = DEFAULT_SETUP, job_fn: JobFn = DEFAULT_JOB,
                 time_fn: TimeFn = DEFAULT_TIME) -> None:
        self.cfg = cfg
        self.setup_fn, self.job_fn, self.time_fn = setup_fn, job_fn, time_fn
        self._started = False
        self._depth = 0

    def __enter__(self) -> RayExecutor:
        # re-entrant: an outer `with` (a benchmark timing ray.init) keeps Ray up across inner ones
        if self._depth == 0:
            self._started = connect(self.cfg)
        self._depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth == 0 and self._started:
            shutdown()
            self._started = False

    def where(self) -> str:
        """The workers a run would get now, in words ("2 Ray worker(s)").

        Raises:
            kit.dispatch.cluster.DispatchError: no alive node carries the configured resource(s)."""
        n = worker_count(self.cfg)
        if self.cfg.dispatch.build_resource is not None:
            return f"{n} Ray build worker(s) and {len(timer_nodes(self.cfg))} timing worker(s)"
        return f"{n} Ray worker(s)"

    def run(self, jobs: Sequence[Job], sink: RecordSink, notes: SessionLog, label: str = "eval") -> RunStats:
        """Run every job of ``jobs`` on Ray workers; each record goes to ``sink`` as it arrives.  Ray must be
        connected (enter the executor first).

        Returns the workers used, the records written and ``work_s``: seconds from the first worker ready to
        the last record, i.e. the run without Ray's and the workers' fixed start.
        Raises:
            kit.dispatch.cluster.DispatchError: see that class.
            Exception: whatever ``setup_fn`` raised on a worker (e.g. :class:`kit.mnn.source.SourceError`):
                that exception itself, its message unchanged (Ray's wrapper, with the remote traceback, is its
                ``__cause__``; a note names the worker slot).
        """
        n = worker_count(self.cfg)
        driver = Driver(self.cfg, sink, notes, self.setup_fn, self.job_fn, self.time_fn, n)
        tally = StageTally(total=len(jobs))
        with job_progress() as progress:
            bar: Any = progress.add_task(label, total=len(jobs), status="starting workers")
            driver.start()
            try:
                driver.run(list(jobs), progress, bar, tally)
            finally:
                driver.close()
        work_s = (driver.last_record - driver.first_ready) if driver.first_ready and driver.last_record else 0.0
        return RunStats(workers=n, ran=tally.done, work_s=work_s)

