"""kit.results.shards: concurrent workers, SIGKILL safety, the resume set, dedupe, stable schema, merge readers."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import struct
import time
from pathlib import Path

import polars as pl
import pytest

from kit.cli import main
from kit.results import schema as shardschema
from kit.results import shards
from kit.results.records import SCHEMA_VERSION, Diagnostic, Record, Status, Trial

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
    assert s["native_samples_ms"] == pl.List(pl.Float64) and s["native_samples_round"] == pl.List(pl.Int64)
    assert s["flags"] == pl.List(pl.Struct({"code": pl.String, "reason": pl.String}))
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
                "threads": pl.Int64,
            }
        )
    )


@pytest.mark.slow  # eight processes writing shards (~15 s on 2 cores)
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


def test_a_harness_error_loses_to_any_other_record_of_its_job_and_is_not_in_the_resume_set(tmp_path):
    """A harness error is the kit's fault: a resumed run retries the job, and the retry is the record that
    counts, even when it started earlier (clocks of two nodes) than the harness error."""
    H = Status.HARNESS_ERROR
    with shards.ShardWriter(tmp_path, "a") as w:
        w.append(make_record("j1", H, started_at="2026-11-29T20:00:01Z"))
        w.append(make_record("j2", H, started_at="2026-11-29T20:00:01Z", error_message="first try"))
        w.append(make_record("j3", started_at="2026-11-29T20:00:05Z", speedup=1.0))
        w.append(make_record("j4", Status.WORKER_LOST, started_at="2026-11-29T20:00:01Z"))
    with shards.ShardWriter(tmp_path, "b") as w:
        w.append(make_record("j1", started_at="2026-11-29T20:00:05Z", speedup=2.0))  # the retry
        w.append(make_record("j2", H, started_at="2026-11-29T20:00:09Z", error_message="second try"))
        w.append(make_record("j2", H, started_at="", error_message="no start"))
        w.append(make_record("j3", H, started_at="2026-11-29T20:00:00Z"))
    df = shards.scan(tmp_path).collect()
    got = {r["job_id"]: (r["status"], r["speedup"], r["error_message"]) for r in df.iter_rows(named=True)}
    assert got == {"j1": ("ok", 2.0, ""), "j2": ("harness_error", None, "second try"), "j3": ("ok", 1.0, ""),
                   "j4": ("worker_lost", None, "")}
    # the resume set: j2 has only harness errors, so a resumed run runs it again; worker_lost is not retried
    assert shards.done_job_ids(tmp_path) == {"j1", "j3", "j4"}


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
    # the kit has always written the version into the metadata; shards without it are refused
    old.write_parquet(tmp_path / "shards" / "old-000000.parquet", metadata={shards.METADATA_KEY: str(SCHEMA_VERSION)})
    with shards.ShardWriter(tmp_path, "new") as w:
        w.append(make_record("new-0", wall_s=1.5))
    df = shards.scan(tmp_path).collect()
    assert df.schema == shards.SHARD_SCHEMA
    assert dict(zip(df["job_id"], df["wall_s"])) == {"old-0": None, "new-0": 1.5}


def test_a_version_1_shard_whose_trials_lack_threads_is_read(tmp_path):
    """Schema 1 wrote Trial without ``threads`` and had no ``flags``/stage-time columns: such a shard passes the
    footer check and reads with those fields null, beside a shard of this version."""
    rec = make_record("v1-0", wall_s=2.0).model_copy(update={"trials": [Trial(seed=3, ok=True, max_abs_err=0.5)]})
    row = shards.records_frame([rec]).drop("flags", "convert_s", "native_samples_round")
    v1_trials = pl.List(pl.Struct({"seed": pl.Int64, "ok": pl.Boolean, "max_abs_err": pl.Float64,
                                   "max_rel_err": pl.Float64, "reason": pl.String}))
    row = row.with_columns(pl.Series("trials", [[{"seed": 3, "ok": True, "max_abs_err": 0.5, "max_rel_err": None,
                                                   "reason": ""}]], dtype=v1_trials),
                           schema_version=pl.lit(1, pl.Int64))
    (tmp_path / "shards").mkdir()
    row.write_parquet(tmp_path / "shards" / "old-000000.parquet", metadata={shards.METADATA_KEY: "1"})
    with shards.ShardWriter(tmp_path, "new") as w:
        w.append(make_record("new-0"))
    df = shards.read_records(tmp_path).sort("job_id")
    assert df.schema == shards.SHARD_SCHEMA
    old = df.row(by_predicate=pl.col("job_id") == "v1-0", named=True)
    assert old["trials"] == [{"seed": 3, "ok": True, "max_abs_err": 0.5, "max_rel_err": None, "reason": "",
                              "threads": None}]
    assert old["flags"] is None and old["convert_s"] is None and old["schema_version"] == 1


# ------------------------------------------------------------------------------- refused inputs


def _seed(run_dir: Path, *job_ids: str, worker: str = "w") -> list[Path]:
    with shards.ShardWriter(run_dir, worker) as w:
        for j in job_ids:
            w.append(make_record(j))
    return w.written


def _assert_cli_merge_refuses(run_dir: Path, capsys, *needles: str) -> None:
    capsys.readouterr()
    assert main(["merge", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mkb: ") and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err


def _no_run(tmp_path: Path) -> Path:
    return tmp_path / "nonexist" / "deep"


def _a_file(tmp_path: Path) -> Path:
    (tmp_path / "afile").write_text("not a run")
    return tmp_path / "afile"


def _empty_dir(tmp_path: Path) -> Path:
    return tmp_path


def _shards_is_a_file(tmp_path: Path) -> Path:
    (tmp_path / "shards").write_text("not a directory")
    return tmp_path


def _no_shard_files(tmp_path: Path) -> Path:
    (tmp_path / "shards").mkdir()
    (tmp_path / "shards" / "w-000000.parquet.tmp").write_bytes(b"PAR1 half written")  # never read
    return tmp_path


@pytest.mark.parametrize(
    ("make", "named", "says"),
    [
        (_no_run, "", "no such run directory"),
        (_a_file, "", "not a directory"),
        (_empty_dir, "", "no shards directory"),
        (_shards_is_a_file, "/shards", "not a directory"),
        (_no_shard_files, "/shards", "no shard files"),
    ],
)
def test_merge_without_records_is_refused_and_writes_nothing(tmp_path, capsys, make, named, says):
    run_dir = make(tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(shards.ShardError, match="no records to merge") as exc:
        shards.merge(run_dir)
    assert str(run_dir) + named in str(exc.value) and says in str(exc.value)
    _assert_cli_merge_refuses(run_dir, capsys, str(run_dir), says)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing created
    # resume of a fresh run still sees no records, no error
    if make in (_no_run, _empty_dir, _no_shard_files):
        assert shards.done_job_ids(run_dir) == set()
        assert shards.read_records(run_dir).height == 0


def _with_version(tmp_path: Path, version: str) -> Path:
    (tmp_path / "shards").mkdir(exist_ok=True)
    path = tmp_path / "shards" / "w9-000000.parquet"
    shards.records_frame([make_record("v")]).write_parquet(path, metadata={shards.METADATA_KEY: version})
    return path


@pytest.mark.parametrize(
    ("version", "says"),
    [
        (str(SCHEMA_VERSION + 1), f"record schema version {SCHEMA_VERSION + 1} is newer than this kit's"),
        ("0", "record schema version 0 does not exist"),
        ("one", "'one'"),
    ],
)
def test_shard_of_unknown_schema_version_is_refused(tmp_path, capsys, version, says):
    _seed(tmp_path, "j0", "j1")
    path = _with_version(tmp_path, version)
    for call in (shards.scan, shards.done_job_ids, shards.merge):
        with pytest.raises(shards.ShardError, match="move it out of") as exc:
            call(tmp_path)
        assert str(path) in str(exc.value) and says in str(exc.value)
    _assert_cli_merge_refuses(tmp_path, capsys, str(path), says)
    assert not (tmp_path / shards.RESULTS_FILE).exists()


def test_shard_of_an_older_known_version_is_read(tmp_path, monkeypatch):
    # as if this kit were at version 2 and the shard from version 1, before the field wall_s existed
    monkeypatch.setattr(shards, "SCHEMA_VERSION", SCHEMA_VERSION + 1)  # what the writer records
    monkeypatch.setattr(shardschema, "SCHEMA_VERSION", SCHEMA_VERSION + 1)  # what the reader accepts
    _seed(tmp_path, "new-0")
    path = tmp_path / "shards" / "old-000000.parquet"
    shards.records_frame([make_record("old-0", wall_s=2.0)]).drop("wall_s").write_parquet(
        path, metadata={shards.METADATA_KEY: str(SCHEMA_VERSION)}
    )
    df = shards.scan(tmp_path).collect()
    assert df.schema == shards.SHARD_SCHEMA
    assert dict(zip(df["job_id"], df["wall_s"])) == {"new-0": None, "old-0": None}


def test_unrelated_parquet_file_is_refused(tmp_path, capsys):
    _seed(tmp_path, "j0")
    foreign = tmp_path / "shards" / "w9-000000.parquet"
    pl.DataFrame({"a": [1]}).write_parquet(foreign)
    with pytest.raises(shards.ShardError, match="w9-000000.parquet: not a record shard.*move it out of"):
        shards.scan(tmp_path)
    with pytest.raises(shards.ShardError, match="w9-000000.parquet"):
        shards.done_job_ids(tmp_path)
    _assert_cli_merge_refuses(tmp_path, capsys, str(foreign), shards.METADATA_KEY)
    # with the version entry but no record columns: still not a shard
    pl.DataFrame({"a": [1]}).write_parquet(foreign, metadata={shards.METADATA_KEY: str(SCHEMA_VERSION)})
    with pytest.raises(shards.ShardError, match="w9-000000.parquet: not a record shard \\(no job_id column\\)"):
        shards.scan(tmp_path)


def test_shard_with_a_wrong_column_dtype_is_refused(tmp_path, capsys):
    _seed(tmp_path, "j0")
    bad = tmp_path / "shards" / "w9-000000.parquet"
    frame = shards.records_frame([make_record("j1", speedup=1.5)])
    frame.with_columns(pl.col("speedup").cast(pl.String)).write_parquet(
        bad, metadata={shards.METADATA_KEY: str(SCHEMA_VERSION)}
    )
    says = "speedup is String, expected Float64"
    for call in (shards.scan, shards.done_job_ids, shards.merge):
        with pytest.raises(shards.ShardError, match="move it out of") as exc:
            call(tmp_path)
        assert str(bad) in str(exc.value) and says in str(exc.value)
    _assert_cli_merge_refuses(tmp_path, capsys, str(bad), says)
    # a nested dtype that differs (a struct field missing) is refused too
    pl.DataFrame({"job_id": ["j1"], "diagnostics": [[{"file": "a.cpp"}]]}).write_parquet(
        bad, metadata={shards.METADATA_KEY: str(SCHEMA_VERSION)}
    )
    with pytest.raises(shards.ShardError, match="diagnostics is List"):
        shards.scan(tmp_path)


def test_all_null_columns_written_as_null_dtype_are_read(tmp_path):
    # another writer may store an all-null column as Null (Polars reads it as the schema's dtype)
    (tmp_path / "shards").mkdir()
    pl.DataFrame(
        {"job_id": ["x"], "speedup": [None], "native_samples_ms": [[]]},
    ).write_parquet(tmp_path / "shards" / "w-000000.parquet", metadata={shards.METADATA_KEY: "1"})
    assert pl.read_parquet_schema(tmp_path / "shards" / "w-000000.parquet")["speedup"] == pl.Null
    df = shards.scan(tmp_path).collect()
    assert df.schema == shards.SHARD_SCHEMA and df["speedup"].to_list() == [None]


def _damage_pages(path: Path) -> None:
    """Overwrite every byte between the leading magic and the footer (both stay intact)."""
    data = bytearray(path.read_bytes())
    footer_len = struct.unpack("<I", bytes(data[-8:-4]))[0]
    for i in range(4, len(data) - 8 - footer_len):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def test_shard_damaged_inside_is_named_when_read(tmp_path, capsys):
    _seed(tmp_path, "a0", worker="a")
    bad = _seed(tmp_path, "b0", worker="b")[0]
    _seed(tmp_path, "c0", worker="c")
    _damage_pages(bad)
    # the footer is intact: only reading the rows finds it, then the reader names the shard
    with pytest.raises(shards.ShardError, match="move it out of") as exc:
        shards.done_job_ids(tmp_path)
    assert str(bad) in str(exc.value) and "cannot read the shard" in str(exc.value)
    calls = (
        shards.merge,
        shards.read_records,
        lambda d: shards.collect(shards.scan(d), d),
        lambda d: shards.collect(shards.scan(d, dedupe=False).select("config_digest").unique(), d),
    )
    for call in calls:
        with pytest.raises(shards.ShardError, match="b-000000.parquet: cannot read the shard"):
            call(tmp_path)
    _assert_cli_merge_refuses(tmp_path, capsys, str(bad), "cannot read the shard")
    assert not (tmp_path / shards.RESULTS_FILE).exists()
    bad.unlink()  # moved away: the rest reads
    assert shards.done_job_ids(tmp_path) == {"a0", "c0"}
