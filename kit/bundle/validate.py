"""``mkb validate BUNDLE``: the submission checker.  Every problem is named; a bundle with none is valid.

In order: the manifest (format, fields); every file's sha256 against it, and no file it does not list; the
records (a record file of a known schema version, the manifest's, one record per job id, every record of the
manifest's config digest); the config (this kit reads it, and its digest is the recorded one); the tasks
(each folder's files are the manifest's); one record per job: the jobs are planned again from the bundled
candidates and config by the kit's own planner (:func:`kit.run.plan.make_jobs`), so a candidate byte changed or a
record removed shows even in a bundle whose manifest was rewritten to match; and the metrics, computed again
from the records by the code the bundle used (:mod:`kit.bundle.scores`), equal the stored ones.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from kit.bundle import scores
from kit.bundle.archive import extract
from kit.bundle.configs import exact_config
from kit.bundle.manifest import (
    MANIFEST,
    METRICS,
    PROVENANCE,
    RECORDS,
    TASKS,
    BundleError,
    Manifest,
    file_hashes,
    read_manifest,
    restore_links,
)
from kit.candidates import NATIVE_METHOD, CandidateSourceError
from kit.report.data import ReportError
from kit.results import shards
from kit.results.records import SCHEMA_VERSION
from kit.results.schema import ShardError, read_schema_version
from kit.run import provenance
from kit.run.plan import make_jobs
from kit.score import metrics
from kit.settings.config import EvalConfig
from kit.suite.tasks import Task, TaskError, load_suite

#: problems listed per kind before "... and N more"
SHOWN = 20


@dataclass
class Checked:
    """What :func:`check_root` found: the bundle's ``root``, its manifest and records (None where they could
    not be read), and every problem, one sentence each naming the file or field."""

    root: Path
    manifest: Manifest | None = None
    records: pl.DataFrame | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def validate(bundle: Path, into: Path | None = None) -> Checked:
    """Extract ``bundle`` (into ``into``, else a temporary folder removed afterwards) and :func:`check_root` it.

    Raises:
        BundleError: the file is missing, not an archive, or holds a refused member (kit.bundle.archive)."""
    if into is not None:
        return check_root(extract(bundle, into))
    with tempfile.TemporaryDirectory(prefix="mkb-validate-") as tmp:
        checked = check_root(extract(bundle, Path(tmp)))
        checked.records = None if checked.records is None else checked.records.clone()
        return checked


def check_root(root: Path) -> Checked:
    """Every check of the module docstring on an extracted bundle ``root``; stops early only where a later
    check would have nothing to read (no manifest, no records, a config this kit cannot read)."""
    out = Checked(root)
    try:
        out.manifest = read_manifest(root)
    except BundleError as exc:
        out.problems.append(str(exc))
        return out
    m = out.manifest
    out.problems += _file_problems(root, m)
    try:
        restore_links(root, m.links)  # after the hashes: the bundle's tree holds regular files only
    except BundleError as exc:
        out.problems.append(str(exc))
        return out
    out.records = _records(root, m, out.problems)
    try:
        cfg = exact_config(_local_config(root, m))
    except BundleError as exc:
        out.problems.append(str(exc))
        return out
    out.problems += _config_problems(root, m, cfg)
    tasks = _tasks(root, m, out.problems)
    if out.records is None or tasks is None:
        return out
    out.problems += _job_problems(cfg, tasks, out.records)
    out.problems += _metric_problems(root, m, out.records, tasks)
    return out


def _file_problems(root: Path, m: Manifest) -> list[str]:
    try:
        have = file_hashes(root)
    except BundleError as exc:
        return [str(exc)]
    out = [f"{p}: listed in {MANIFEST} but missing" for p in sorted(set(m.files) - set(have))]
    out += [f"{p}: not listed in {MANIFEST} (a file added to the bundle)" for p in sorted(set(have) - set(m.files))]
    out += [f"{p}: sha256 {have[p][:12]}... differs from {MANIFEST} ({m.files[p][:12]}...): the file was changed"
            for p in sorted(set(have) & set(m.files)) if have[p] != m.files[p]]
    return out


def _records(root: Path, m: Manifest, problems: list[str]) -> pl.DataFrame | None:
    """The bundle's records, after the checks on them (each failure appended to ``problems``)."""
    path = root / RECORDS
    if not path.is_file():
        problems.append(f"{RECORDS}: missing")
        return None
    try:
        df = shards.read_files([path])
        version = read_schema_version(path)
    except ShardError as exc:
        problems.append(str(exc).replace(str(root) + "/", ""))
        return None
    if version != m.record_schema_version:
        problems.append(f"{RECORDS}: record schema version {version}, {MANIFEST} says {m.record_schema_version}")
    if m.record_schema_version > SCHEMA_VERSION:
        problems.append(f"{MANIFEST}: record schema version {m.record_schema_version} is newer than this kit's "
                        f"({SCHEMA_VERSION})")
    if df.height != m.n_records:
        problems.append(f"{RECORDS}: {df.height} records, {MANIFEST} says {m.n_records}")
    dup = sorted(set(df.filter(pl.col("job_id").is_duplicated())["job_id"].to_list()))
    if dup:
        problems.append(f"{RECORDS}: {len(dup)} job id(s) with more than one record ({', '.join(dup[:5])})")
    other = sorted(set(df["config_digest"].to_list()) - {m.config_digest})
    if other:
        problems.append(f"{RECORDS}: records of config digest {other}, {MANIFEST} says {m.config_digest}")
    return df


def _local_config(root: Path, m: Manifest) -> dict:
    """The manifest's config with the bundle's own paths: its tasks, and each source's bundled copy."""
    data = json.loads(json.dumps(m.config))
    by_method = {s.method: s for s in m.sources}
    data.setdefault("tasks", {})["dir"] = str(root / TASKS)
    for src in data.get("candidates", {}).get("sources", []):
        if isinstance(src, dict) and src.get("method") in by_method:
            src["path"] = str(root / by_method[src["method"]].path)
    return data


def _config_problems(root: Path, m: Manifest, cfg: EvalConfig) -> list[str]:
    out = []
    if cfg.digest() != m.config_digest:
        out.append(f"{MANIFEST}: config digest {m.config_digest}, its config hashes to {cfg.digest()}: the config "
                   f"was changed")
    methods = [s.method for s in cfg.candidates.sources]
    if sorted(methods) != sorted(s.method for s in m.sources):
        out.append(f"{MANIFEST}: sources {[s.method for s in m.sources]} differ from the config's {methods}")
    try:
        prov = provenance.parse((root / PROVENANCE).read_text(encoding="utf-8"))
        if prov.config_digest != m.config_digest:
            out.append(f"{PROVENANCE}: config digest {prov.config_digest!r}, {MANIFEST} says {m.config_digest}")
    except (OSError, ValueError) as exc:
        out.append(f"{PROVENANCE}: unreadable ({exc})")
    return out


def _tasks(root: Path, m: Manifest, problems: list[str]) -> list[Task] | None:
    """The bundled task folders, checked against the manifest's entries (None: they cannot be loaded)."""
    try:
        suite = {t.id: t for t in load_suite(root / TASKS, "all")}
    except TaskError as exc:
        problems.append(f"{TASKS}: {str(exc).replace(str(root) + '/', '')}")
        return None
    for tid in sorted(set(m.tasks) - set(suite)):
        problems.append(f"{TASKS}: task {tid} is in {MANIFEST} but has no folder")
    for tid in sorted(set(suite) - set(m.tasks)):
        problems.append(f"{TASKS}: task folder {tid} is not in {MANIFEST}")
    for tid in sorted(set(suite) & set(m.tasks)):
        entry, t = m.tasks[tid], suite[tid]
        prefix = f"{TASKS}/{t.category}/{tid}/"
        listed = {k[len(prefix):]: v for k, v in m.files.items() if k.startswith(prefix)}
        if (entry.category, entry.split) != (t.category, t.split) or listed != entry.files:
            problems.append(f"{TASKS}: task {tid}: its folder differs from its {MANIFEST} entry")
    return list(suite.values())


def _job_problems(cfg: EvalConfig, tasks: list[Task], records: pl.DataFrame) -> list[str]:
    """One record per job: the jobs planned again from the bundled candidates against the records."""
    try:
        jobs, orphans = make_jobs(cfg, tasks, {t.id for t in tasks}, None)
    except CandidateSourceError as exc:
        return [f"candidates: {exc}"]
    planned = {(j.method, j.task.id, j.sample_id): j.job_id for j in jobs}
    planned |= {(r.method, r.task_id, r.sample_id): r.job_id for r in orphans}
    rows = records.filter(pl.col("method") != NATIVE_METHOD).select("method", "task_id", "sample_id", "job_id")
    got = {(m, t, s): j for m, t, s, j in rows.iter_rows()}
    name = "/".join
    out = [f"{RECORDS}: no record of job {name(k)} (its candidate is in the bundle): a record was removed"
           for k in sorted(set(planned) - set(got))]
    out += [f"{RECORDS}: record of {name(k)} has no candidate in the bundle" for k in sorted(set(got) - set(planned))]
    out += [f"candidates: {name(k)}: its bundled files give job id {planned[k]}, its record says {got[k]} (the "
            f"candidate's files were changed)" for k in sorted(set(got) & set(planned)) if got[k] != planned[k]]
    if cfg.candidates.native:
        n_native = records.filter(pl.col("method") == NATIVE_METHOD).height
        if n_native != len(tasks):
            out.append(f"{RECORDS}: {n_native} record(s) of the native method, one per task expected ({len(tasks)})")
    return _cap(out)


def _metric_problems(root: Path, m: Manifest, records: pl.DataFrame, tasks: list[Task]) -> list[str]:
    try:
        stored = json.loads((root / METRICS).read_text(encoding="utf-8"))
        denominator = scores.denominator(root, records, metrics.tasks_frame(tasks))
        again = scores.compute(records, denominator, scores.noise_of(root, records), m.config["report"]["fast_p"])
    except (OSError, ValueError) as exc:
        return [f"{METRICS}: unreadable ({exc})"]
    except (ReportError, metrics.MetricsError) as exc:
        return [f"metrics cannot be computed from the records: {exc}"]
    return scores.differences(stored, again)


def _cap(problems: list[str]) -> list[str]:
    if len(problems) <= SHOWN:
        return problems
    return [*problems[:SHOWN], f"... and {len(problems) - SHOWN} more of the same kind"]
