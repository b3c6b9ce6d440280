"""kit.shards: concurrent workers, SIGKILL safety, the resume set, dedupe, stable schema, merge readers."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from pathlib import Path

import polars as pl
import pytest

from kit import shards
from kit.records import SCHEMA_VERSION, Diagnostic, Record, Status, Trial

N_WORKERS = 8
PER_WORKER = 30


def make_record(job_id: str, status: Status = Status.OK, **kw) -> Record:
    base = {
        "job_id": job_id,
        "method": "m",
        "task_id": f"t_{job_id}",
        "sample_id": "0",
        "candidate_sha256": "0" * 64,
        "config_digest": "cfg",
        "status": status,
    }
    base.update(kw)
    return Record(**base)


def _worker(run_dir: str, worker: str, n: int, flush_every: int) -> None:
    with shards.ShardWriter(Path(run_dir), worker, flush_every=flush_every) as w:
        for i in range(n):
            w.append(
                make_record(
                    f"{worker}-{i}",
                    speedup=1.0 + i / 100,
                    native_samples_ms=[0.1 * i, 0.2],
                    diagnostics=[Diagnostic(file="a.cpp", line=i, severity="error", message=f"e{i}")],
                    trials=[Trial(seed=i, ok=True, max_abs_err=1e-6)],
                    worker=worker,
                    started_at=f"2026-11-29T20:00:{i:02d}Z",
                )
            )


def _forever(run_dir: str, log_path: str) -> None:
    """Append records until killed; log each job id after append() has returned."""
    w = shards.ShardWriter(Path(run_dir), "victim")
    with open(log_path, "a", encoding="utf-8") as log:
        i = 0
        while True:
            w.append(make_record(f"victim-{i}"))
            log.write(f"victim-{i}\n")
            log.flush()
            i += 1


def test_schema_matches_record_fields():
    s = shards.SHARD_SCHEMA
    assert list(s.names()) == list(Record.model_fields)
    assert s["status"] == pl.String and s["error_kind"] == pl.String  # enums as strings
    assert s["signal"] == pl.Int64 and s["speedup"] == pl.Float64 and s["timing_emulated"] == pl.Boolean
    assert s["native_samples_ms"] == pl.List(pl.Float64)
    assert s["diagnostics"] == pl.List(
        pl.Struct(
            {
                "file": pl.String,
                "line": pl.Int64,
                "column": pl.Int64,
                "severity": pl.String,
                "message": pl.String,
                "context": pl.String,
            }
        )
    )
    assert s["trials"] == pl.List(
        pl.Struct(
            {
                "seed": pl.Int64,
                "ok": pl.Boolean,
                "max_abs_err": pl.Float64,
                "max_rel_err": pl.Float64,
                "reason": pl.String,
            }
        )
    )


def test_eight_concurrent_workers(tmp_path):
    ctx = mp.get_context("spawn")  # polars thread pools do not survive fork
    # half of the workers flush every record, half every 7 records (the last batch is short: 30 = 4*7 + 2)
    procs = [
        ctx.Process(target=_worker, args=(str(tmp_path), f"w{k}", PER_WORKER, 1 if k % 2 == 0 else 7))
        for k in range(N_WORKERS)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        assert p.exitcode == 0
    files = shards.shard_paths(tmp_path)
    # 4 workers x 30 files + 4 workers x ceil(30/7)=5 files
    assert len(files) == 4 * 30 + 4 * 5
    df = shards.scan(tmp_path).collect()
    assert df.height == N_WORKERS * PER_WORKER
    assert df.schema == shards.SHARD_SCHEMA
    assert shards.done_job_ids(tmp_path) == {f"w{k}-{i}" for k in range(N_WORKERS) for i in range(PER_WORKER)}
    row = df.filter(pl.col("job_id") == "w3-12").row(0, named=True)
    assert row["diagnostics"][0]["message"] == "e12" and row["diagnostics"][0]["line"] == 12
    assert row["trials"][0]["seed"] == 12 and row["trials"][0]["ok"] is True
    assert row["native_samples_ms"] == pytest.approx([1.2, 0.2])
    assert row["speedup"] == pytest.approx(1.12)
    for f in files:
        assert shards.read_schema_version(f) == SCHEMA_VERSION
    assert set(df["schema_version"].to_list()) == {SCHEMA_VERSION}


def test_sigkill_loses_nothing_returned_and_tmp_is_ignored(tmp_path):
    log = tmp_path / "returned.txt"
    ctx = mp.get_context("spawn")  # polars thread pools do not survive fork
    p = ctx.Process(target=_forever, args=(str(tmp_path), str(log)))
    p.start()
    deadline = time.monotonic() + 120  # a safety net against a hang, not a timing assertion
    while len(shards.shard_paths(tmp_path)) < 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(p.pid, signal.SIGKILL)
    p.join()
    assert p.exitcode == -signal.SIGKILL
    returned = [ln for ln in log.read_text().splitlines(keepends=True) if ln.endswith("\n")]
    returned_ids = {ln.strip() for ln in returned}
    assert len(returned_ids) >= 19
    # a half-written batch left behind by a kill: garbage bytes under the temp name
    (tmp_path / "shards" / "victim-999999.parquet.tmp").write_bytes(b"PAR1 truncated")
    done = shards.done_job_ids(tmp_path)
    assert returned_ids <= done  # nothing whose append() returned is lost
    n = len(done)
    assert done == {f"victim-{i}" for i in range(n)}  # no gaps, no partial rows
    # resume: a new writer for the same worker continues the sequence, never overwrites
    before = {p_.name: p_.stat().st_mtime_ns for p_ in shards.shard_paths(tmp_path)}
    with shards.ShardWriter(tmp_path, "victim") as w:
        for i in range(n, n + 5):
            if f"victim-{i}" not in done:
                w.append(make_record(f"victim-{i}"))
    for name, mtime in before.items():
        assert (tmp_path / "shards" / name).stat().st_mtime_ns == mtime
    assert shards.done_job_ids(tmp_path) == {f"victim-{i}" for i in range(n + 5)}
    assert shards.scan(tmp_path).collect().height == n + 5


def test_dedupe_keeps_earliest_started_at(tmp_path):
    with shards.ShardWriter(tmp_path, "a") as w:
        w.append(make_record("j1", started_at="2026-11-29T20:00:05Z", speedup=1.0))
        w.append(make_record("j2", started_at="", speedup=7.0))
    with shards.ShardWriter(tmp_path, "b") as w:
        w.append(make_record("j1", started_at="2026-11-29T20:00:01Z", speedup=2.0))  # earlier: kept
        w.append(make_record("j2", started_at="2026-11-29T20:00:09Z", speedup=8.0))  # empty sorts last
        w.append(make_record("j3", started_at="", speedup=3.0))
    with shards.ShardWriter(tmp_path, "c") as w:
        w.append(make_record("j3", started_at="", speedup=4.0))  # tie: first in shard order (a < b < c)
    assert shards.scan(tmp_path, dedupe=False).collect().height == 6
    df = shards.scan(tmp_path).collect()
    assert dict(zip(df["job_id"], df["speedup"])) == {"j1": 2.0, "j2": 8.0, "j3": 3.0}


def test_all_null_columns_keep_dtypes(tmp_path):
    # a record where every optional field is null / empty
    with shards.ShardWriter(tmp_path, "w") as w:
        w.append(make_record("x", Status.COMPILE_ERROR))
    f = shards.shard_paths(tmp_path)[0]
    on_disk = pl.read_parquet(f)
    assert on_disk.schema == shards.SHARD_SCHEMA
    assert on_disk["speedup"].dtype == pl.Float64 and on_disk["speedup"][0] is None
    assert on_disk["diagnostics"].dtype == shards.SHARD_SCHEMA["diagnostics"]
    assert on_disk["native_samples_ms"].dtype == pl.List(pl.Float64)
    # empty run: same schema, zero rows
    assert shards.scan(tmp_path / "nothing").collect().schema == shards.SHARD_SCHEMA
    assert shards.done_job_ids(tmp_path / "nothing") == set()


def _merged(run_dir: Path) -> Path:
    with shards.ShardWriter(run_dir, "w", flush_every=3) as w:
        for i in range(5):
            w.append(make_record(f"j{i}", native_samples_ms=[float(i)]))
        w.append(make_record("j0", started_at="2099-01-01T00:00:00Z"))  # later duplicate: dropped
    return shards.merge(run_dir)


def test_merge_readable_by_polars(tmp_path):
    out = _merged(tmp_path)
    assert out == tmp_path / "results.parquet"
    df = pl.read_parquet(out)
    assert sorted(df["job_id"]) == [f"j{i}" for i in range(5)]
    assert df.schema == shards.SHARD_SCHEMA
    assert shards.read_schema_version(out) == SCHEMA_VERSION
    assert shards.done_job_ids(tmp_path) == set(df["job_id"])  # results.parquet is not a shard


def test_merge_readable_by_pyarrow(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    out = _merged(tmp_path)
    table = pq.read_table(out)
    assert table.num_rows == 5
    rows = {r["job_id"]: r for r in table.to_pylist()}
    assert rows["j3"]["native_samples_ms"] == [3.0]
    assert pq.read_metadata(out).metadata[shards.METADATA_KEY.encode()] == str(SCHEMA_VERSION).encode()


def test_bad_worker_id(tmp_path):
    with pytest.raises(shards.ShardError, match="worker_id"):
        shards.ShardWriter(tmp_path, "w-1")
    with pytest.raises(shards.ShardError, match="flush_every"):
        shards.ShardWriter(tmp_path, "w", flush_every=0)


def test_older_shard_without_a_new_field_reads_as_null(tmp_path):
    # a shard written before the field wall_s existed, with a column that no longer exists
    old = (
        shards.records_frame([make_record("old-0", wall_s=2.0)])
        .drop("wall_s")
        .with_columns(retired=pl.lit("x"))
    )
    (tmp_path / "shards").mkdir()
    old.write_parquet(tmp_path / "shards" / "old-000000.parquet")
    with shards.ShardWriter(tmp_path, "new") as w:
        w.append(make_record("new-0", wall_s=1.5))
    df = shards.scan(tmp_path).collect()
    assert df.schema == shards.SHARD_SCHEMA
    assert dict(zip(df["job_id"], df["wall_s"])) == {"old-0": None, "new-0": 1.5}
