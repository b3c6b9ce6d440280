"""The run directory is checked before any setup: one config digest per directory, writable, whole shards;
bad run inputs are user errors (exit 2, the file or field named, no traceback)."""

from __future__ import annotations

import pytest
from conftest_fixture import fixture_config_text

from kit.cli import main
from kit.results.records import Record, Status
from kit.results.shards import ShardError, ShardWriter, scan
from kit.run import provenance, rundir
from kit.settings.config import ConfigError, EvalConfig, load_config


def _record(digest: str, i: int = 0) -> Record:
    return Record(job_id=f"j{i}", method="m", task_id="fx_argmax", sample_id=f"s{i}", candidate_sha256="x",
                  config_digest=digest, status=Status.OK)


def _cfg_file(tmp_path, extra: str = "") -> str:
    p = tmp_path / "cfg.toml"
    p.write_text(fixture_config_text(tmp_path / "run", cache_dir=tmp_path / "cache") + extra)
    return str(p)


def _seed_run(cfg: EvalConfig) -> None:
    """One record and the provenance of ``cfg``, as a finished session leaves them."""
    with ShardWriter(cfg.run.dir, "w0") as w:
        w.append(_record(cfg.digest()))
    provenance.save(cfg.run.dir, None, provenance.collect(cfg, None))


def test_same_config_resumes_another_digest_is_refused_naming_the_settings(tmp_path):
    path = _cfg_file(tmp_path, "[timing]\nthreads = 1\n")
    first = load_config(path)
    _seed_run(first)
    assert rundir.prepare(first) == first.run.dir  # the same settings: resumable
    assert rundir.prepare(load_config(path, ["--dispatch.workers", "2"])) == first.run.dir  # not in the digest

    changed = load_config(path, ["--timing.threads", "2", "--verify.trials", "3"])
    with pytest.raises(ConfigError) as exc:
        rundir.prepare(changed)
    msg = str(exc.value)
    assert "run.dir" in msg and first.digest() in msg and changed.digest() in msg
    assert "timing.threads (1 -> 2)" in msg and "verify.trials (5 -> 3)" in msg

    # through the command: exit 2, the message, no traceback, nothing run or written
    before = sorted(p.name for p in (first.run.dir / "shards").iterdir())
    assert main(["eval", "--config", path, "--timing.threads", "2"]) == 2
    assert sorted(p.name for p in (first.run.dir / "shards").iterdir()) == before


def test_unknown_settings_when_the_provenance_is_gone(tmp_path):
    cfg = load_config(_cfg_file(tmp_path))
    _seed_run(cfg)
    (cfg.run.dir / provenance.FILE).unlink()
    with pytest.raises(ConfigError, match="changed settings are not known"):
        rundir.prepare(load_config(_cfg_file(tmp_path), ["--timing.rounds", "7"]))


def test_run_dir_that_is_a_file_is_a_config_error(tmp_path):
    (tmp_path / "run").write_text("not a directory")
    with pytest.raises(ConfigError, match="run.dir"):
        rundir.prepare(load_config(_cfg_file(tmp_path)))


def test_junk_shard_is_named_by_scan_merge_and_report(tmp_path, capsys):
    cfg = load_config(_cfg_file(tmp_path))
    _seed_run(cfg)
    junk = cfg.run.dir / "shards" / "w9-000001.parquet"
    junk.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(ShardError, match="w9-000001.parquet: not a Parquet record shard"):
        scan(cfg.run.dir)
    for argv in (["merge", str(cfg.run.dir)], ["report", str(cfg.run.dir), "--tasks-dir", str(tmp_path)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "w9-000001.parquet" in err and "Traceback" not in err


@pytest.mark.parametrize("content", ['{"sessions": 5}', '{"sessions": [1, 2]}', '{"differs": []}', "[]", "{bad"])
def test_damaged_provenance_stops_eval_and_report_naming_the_file(tmp_path, capsys, content):
    cfg = load_config(_cfg_file(tmp_path))
    _seed_run(cfg)
    (cfg.run.dir / provenance.FILE).write_text(content)
    assert main(["eval", "--config", _cfg_file(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "provenance.json" in err and "move the file away" in err and "Traceback" not in err


def test_report_errors_are_user_errors(tmp_path, capsys, fixture_tasks_dir):
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty")]) == 2
    assert "no records" in capsys.readouterr().err
    assert not (tmp_path / "empty" / "report").exists()  # a refused report leaves no folder behind
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert not (tmp_path / "missing").exists()
    run = tmp_path / "run"
    with ShardWriter(run, "w0") as w:
        w.append(_record("d"))
    (run / "report").write_text("a file where the report folder goes")
    assert main(["report", str(run), "--tasks-dir", str(fixture_tasks_dir)]) == 2
    assert "cannot write the report" in capsys.readouterr().err
    assert main(["report", str(run), "--tasks-dir", str(tmp_path / "nowhere")]) == 2
    assert f"--tasks-dir: {tmp_path / 'nowhere'} is not a folder" in capsys.readouterr().err


def test_a_run_dir_in_use_by_another_eval_is_refused(tmp_path):
    """Two `mkb eval` on one run.dir would both run the pending jobs: the second is refused, naming the
    first's pid; once the first ends (here: killed), the directory is free again."""
    import subprocess
    import sys

    path = _cfg_file(tmp_path)
    cfg = load_config(path)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from kit.run import rundir; from kit.settings.config import load_config; "
         "rundir.prepare(load_config(sys.argv[1])); print('held', flush=True); time.sleep(600)", path],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match=f"in use by another mkb eval \\(pid {holder.pid}\\)"):
            rundir.prepare(cfg)
    finally:
        holder.kill()
        holder.wait()
    assert rundir.prepare(cfg) == cfg.run.dir
    rundir.release(cfg.run.dir)


def _rec(task: str, sample: str, status: Status = Status.OK, digest: str = "") -> Record:
    return Record(job_id=f"{task}/{sample}", method="m", task_id=task, sample_id=sample, candidate_sha256="x",
                  config_digest=digest, status=status, split="test")


def test_a_session_that_ran_nothing_still_adds_its_task_selection(tmp_path, capsys):
    """A resumed eval with more tasks.ids but nothing left to run adds no session to provenance.json; its
    selection is kept anyway, so the report it writes (and mkb report) counts the tasks it printed."""
    path = _cfg_file(tmp_path)
    first = load_config(path, ["--tasks.ids", '["fx_argmax","fx_exp"]'])
    with ShardWriter(first.run.dir, "w0") as w:
        w.append(_rec("fx_argmax", "a", digest=first.digest()))
        w.append(_rec("fx_exp", "a", Status.COMPILE_ERROR, first.digest()))
    provenance.save(first.run.dir, None, provenance.collect(first, None))
    sels = provenance.task_selections(provenance.load(first.run.dir))
    assert [(s.split, s.ids) for s in sels] == [("all", ["fx_argmax", "fx_exp"])]
    assert sels[0].dir == str(first.tasks.dir.resolve())

    more = load_config(path, ["--tasks.ids", '["fx_argmax","fx_exp","fx_sub"]'])
    provenance.note_selection(more.run.dir, more)
    provenance.note_selection(more.run.dir, more)  # once only
    prov = provenance.load(more.run.dir)
    assert len(prov.sessions) == 1 and len(prov.dump()[provenance.EXTRA_SELECTIONS]) == 1
    assert [s.ids for s in provenance.task_selections(prov)][-1] == ["fx_argmax", "fx_exp", "fx_sub"]
    # a later session keeps the extra selection
    provenance.save(more.run.dir, prov, provenance.collect(first, None))
    assert len(provenance.task_selections(provenance.load(more.run.dir))) == 3

    # mkb report from another folder finds the tasks (absolute path recorded) and counts the 3 tasks
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    import os
    cwd = os.getcwd()
    os.chdir(elsewhere)
    try:
        assert main(["report", str(more.run.dir), "--out", str(tmp_path / "rep")]) == 0
    finally:
        os.chdir(cwd)
    import json
    rows = json.loads((tmp_path / "rep" / "report.json").read_text())["summary"]
    assert {r["split"]: (r["n_tasks"], r["n_compiled"]) for r in rows} == {"test": (2, 1), "train": (1, 0)}


def test_a_shard_damaged_inside_stops_a_resumed_eval_before_any_job(tmp_path, capsys):
    """Only four columns decide the resume set; the check reads every column, so damage in any of them is
    named up front instead of after the pending jobs ran."""
    cfg = load_config(_cfg_file(tmp_path))
    with ShardWriter(cfg.run.dir, "w0") as w:
        w.append(_rec("fx_argmax", "a", digest=cfg.digest()))
    shard = next((cfg.run.dir / "shards").iterdir())
    # a value far into a column the resume set does not read, corrupted: the footer stays whole
    data = bytearray(shard.read_bytes())
    with ShardWriter(cfg.run.dir, "w1") as w:
        w.append(_rec("fx_exp", "b", digest=cfg.digest()))
    from kit.results.shards import read_records
    pos = len(data) // 4
    for i in range(pos, pos + 64):
        data[i] ^= 0xFF
    shard.write_bytes(bytes(data))
    try:
        read_records(cfg.run.dir)
    except ShardError:
        pass
    else:
        pytest.skip("these flipped bytes happened to decode: nothing to detect")
    with pytest.raises(ShardError, match=shard.name):
        rundir.recorded_jobs(cfg.run.dir, [("m", "fx_sub", "c", "new")])


def test_recorded_jobs_is_the_resume_set_and_refuses_a_changed_sample(tmp_path):
    cfg = load_config(_cfg_file(tmp_path))
    assert rundir.recorded_jobs(cfg.run.dir, [("m", "fx_argmax", "a", "x")]) == set()  # no records yet
    with ShardWriter(cfg.run.dir, "w0") as w:
        w.append(_rec("fx_argmax", "a", digest=cfg.digest()))
        w.append(_rec("fx_exp", "b", digest=cfg.digest()))
    same = [("m", "fx_argmax", "a", "fx_argmax/a"), ("m", "fx_sub", "new", "fx_sub/new")]
    assert rundir.recorded_jobs(cfg.run.dir, same) == {"fx_argmax/a", "fx_exp/b"}
    with pytest.raises(ConfigError, match="1 sample\\(s\\) .*m/fx_argmax/a"):
        rundir.recorded_jobs(cfg.run.dir, [("m", "fx_argmax", "a", "edited")])


def test_results_parquet_alone_is_checked_like_a_shard(tmp_path, capsys, fixture_tasks_dir):
    import polars as pl
    run = tmp_path / "run"
    run.mkdir()
    pl.DataFrame({"a": [1]}).write_parquet(run / "results.parquet")
    assert main(["report", str(run), "--tasks-dir", str(fixture_tasks_dir)]) == 2
    err = capsys.readouterr().err
    assert "results.parquet" in err and "Traceback" not in err and not (run / "report").exists()


def test_records_of_an_older_schema_are_refused_as_an_older_kit_not_as_changed_settings(tmp_path):
    cfg = load_config(_cfg_file(tmp_path))
    old = _record("0123456789abcdef").model_copy(update={"schema_version": 1})
    with ShardWriter(cfg.run.dir, "w0") as w:
        w.append(old)
    with pytest.raises(ConfigError) as exc:
        rundir.prepare(cfg)
    msg = str(exc.value)
    assert "older kit" in msg and "record schema 1" in msg and "0123456789abcdef" in msg
    assert "settings changed" not in msg and "not known" not in msg
    assert rundir.older_schema(cfg.run.dir) == 1
