"""The run directory is checked before any setup: one config digest per directory, writable, whole shards;
bad run inputs are user errors (exit 2, the file or field named, no traceback)."""

from __future__ import annotations

import pytest
from conftest_fixture import fixture_config_text

from kit import provenance, rundir
from kit.cli import main
from kit.config import ConfigError, EvalConfig, load_config
from kit.records import Record, Status
from kit.shards import ShardError, ShardWriter, scan


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
        [sys.executable, "-c", "import sys, time; from kit import rundir; from kit.config import load_config; "
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
