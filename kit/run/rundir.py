"""The run directory of ``mkb eval`` (``run.dir``), checked before any slow setup.

A run directory holds the records of one configuration: every record carries the config digest
(:meth:`kit.settings.config.EvalConfig.digest`, over the settings that change a job's result), and a resumed run
skips the jobs already recorded.  Records of two digests side by side would score one sample twice, so
a config whose digest differs from the records already there is refused, naming the settings that
changed (read from the ``config`` that ``provenance.json`` keeps).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import polars as pl

from kit.results import rules as scoring
from kit.results import shards
from kit.results.records import SCHEMA_VERSION
from kit.run import provenance
from kit.settings.config import ConfigError, EvalConfig


def prepare(cfg: EvalConfig) -> Path:
    """Create ``run.dir`` if needed, check it can take this run's records, and take its lock (held until
    :func:`release` or the end of the process); returns it.

    Raises:
        ConfigError: ``run.dir`` is not a writable directory, it holds records of another config digest
            (the message names the changed settings and both digests), or another process evaluates into it.
        kit.run.provenance.ProvenanceError: ``provenance.json`` there is not valid.
        kit.results.shards.ShardError: a shard there is not a Parquet file.
    """
    run_dir = cfg.run.dir
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"run.dir: cannot create {run_dir}: {exc.strerror}") from exc
    if not run_dir.is_dir() or not os.access(run_dir, os.W_OK | os.X_OK):
        raise ConfigError(f"run.dir: {run_dir} is not a writable directory")
    before = provenance.load(run_dir)
    digests = recorded_digests(run_dir)
    other = sorted(digests - {cfg.digest()})
    if other:
        older = older_schema(run_dir)
        if older is not None:
            raise ConfigError(
                f"run.dir: {run_dir} holds records of an older kit (record schema {older}, this kit writes "
                f"{SCHEMA_VERSION}; config digest {', '.join(other)}): such a run cannot be resumed. Evaluate into "
                f"another run.dir; mkb report still shows the old run beside the new one")
        changed = changed_settings(before.config if before else None, cfg)
        what = f"settings changed: {', '.join(changed)}" if changed else "the changed settings are not known"
        raise ConfigError(
            f"run.dir: {run_dir} holds records of another configuration (config digest {', '.join(other)}; "
            f"this config: {cfg.digest()}; {what}). Evaluate into another run.dir, or restore those settings "
            f"to resume this run"
        )
    _lock(run_dir)  # last: a refused run holds nothing
    return run_dir


LOCK_FILE = ".lock"
#: run directories this process holds (resolved path -> open lock file descriptor)
_HELD: dict[Path, int] = {}


def _lock(run_dir: Path) -> None:
    """Hold ``run_dir/.lock`` (flock, exclusive) until :func:`release` or the end of this process, so two
    ``mkb eval`` never write into one run directory at once (the second would redo the first's pending jobs: doubled records).

    Raises:
        ConfigError: another process holds it (the message gives its pid).
    """
    key = run_dir.resolve()
    if key in _HELD:
        return
    fd = os.open(run_dir / LOCK_FILE, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise ConfigError(f"run.dir: {run_dir} is in use by another mkb eval (pid {holder}); wait for it to end, "
                          f"or evaluate into another run.dir") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    _HELD[key] = fd


def release(run_dir: Path) -> None:
    """Let go of ``run_dir``'s lock (:func:`kit.outline.evaluate.evaluate` does when it ends)."""
    fd = _HELD.pop(Path(run_dir).resolve(), None)
    if fd is not None:
        os.close(fd)


def older_schema(run_dir: Path) -> int | None:
    """The oldest record schema version in ``run_dir`` when it is older than this kit's, else None."""
    col = shards.collect(shards.scan(run_dir, dedupe=False).select(pl.col("schema_version").min()), run_dir)
    oldest = col["schema_version"][0] if col.height else None
    return int(oldest) if oldest is not None and oldest < SCHEMA_VERSION else None


def recorded_digests(run_dir: Path) -> set[str]:
    """The config digests of the records in ``run_dir``'s shards (empty without shards)."""
    col = shards.collect(shards.scan(run_dir, dedupe=False).select(pl.col("config_digest").unique()), run_dir)
    return {d for d in col["config_digest"].to_list() if d}


def recorded_jobs(run_dir: Path, samples: Iterable[tuple[str, str, str, str]]) -> set[str]:
    """The resume set of ``run_dir`` (every job id with a record there whose status is not retried: a job
    recorded only as ``harness_error``, the kit's fault, runs again; :mod:`kit.results.rules`), after refusing to
    resume when a sample it has a record of (of any status) now has other candidate files.

    A job id covers the candidate's sha256 (:func:`kit.job.record.make_job_id`), so an edited candidate would
    be evaluated again beside its old record: two records of one (method, task, sample), which scoring
    refuses.  ``samples`` are ``(method, task_id, sample_id, job_id)`` of this run's jobs.

    Raises:
        ConfigError: names the changed samples (``method/task/sample``, the first 5) and how many.
        kit.results.shards.ShardError: a shard there cannot be read (every column of every record is read).
    """
    recorded: dict[tuple[str, str, str], set[str]] = {}
    # every column read (not only these four): a shard damaged anywhere is named now, before any job runs,
    # not when the run's summary reads it at the end (~1 s per 10k records)
    df = shards.read_records(run_dir, dedupe=False).select(
        "method", "task_id", "sample_id", "job_id", retried=scoring.is_retried()).unique()
    done = set(df.filter(~pl.col("retried"))["job_id"].to_list())
    for method, task_id, sample_id, job_id, _ in df.iter_rows():
        recorded.setdefault((method, task_id, sample_id), set()).add(job_id)
    changed = sorted({(m, t, s) for m, t, s, job_id in samples
                      if (m, t, s) in recorded and job_id not in recorded[(m, t, s)]})
    if changed:
        shown = ", ".join("/".join(k) for k in changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        raise ConfigError(
            f"run.dir: {run_dir} holds records of {len(changed)} sample(s) whose candidate files have changed "
            f"since (method/task/sample: {shown}); a run scores each sample once. Evaluate into another run.dir, "
            f"or restore those files to resume this run"
        )
    return done


def changed_settings(recorded: Any, cfg: EvalConfig) -> list[str]:
    """Dotted names of the digest's settings (:meth:`EvalConfig.digest_payload`) whose value in the recorded
    config (``provenance.json``'s ``config``) differs from ``cfg``, as ``timing.threads (1 -> 2)``."""
    if not isinstance(recorded, dict):
        return []
    out = []
    for section, values in cfg.digest_payload().items():
        old_sec = recorded.get(section) if isinstance(recorded.get(section), dict) else {}
        for key, new in values.items():
            old = old_sec.get(key)
            if old != new:
                out.append(f"{section}.{key} ({old!r} -> {new!r})")
    return out
