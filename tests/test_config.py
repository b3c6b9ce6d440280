"""Config loading: TOML + MKB_ environment + CLI overrides, unknown keys rejected at every level."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest_fixture import fixture_config_text

from kit.settings.config import ConfigError, EvalConfig, load_config


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "cfg.toml"
    p.write_text(text)
    return p


def test_defaults_and_toml_values(tmp_path):
    cfg = load_config(write(tmp_path, "[timing]\niterations = 250\n[tasks]\nsplit = 'train'\ndir = 'tasks'\n"))
    assert cfg.timing.iterations == 250
    assert cfg.tasks.split == "train"
    assert cfg.verify.trials == 5  # default kept
    # relative paths in the file resolve against the file's folder; defaults stay relative to the cwd
    assert cfg.tasks.dir == tmp_path / "tasks"
    assert cfg.run.dir == Path("runs/default")


def test_unknown_nested_key_names_key_and_file(tmp_path):
    p = write(tmp_path, "[timing]\nwarmupp = 3\n")
    with pytest.raises(ConfigError) as ei:
        load_config(p)
    msg = str(ei.value)
    assert "timing.warmupp" in msg and str(p) in msg


def test_unknown_top_level_and_deep_key(tmp_path):
    with pytest.raises(ConfigError, match="unknown key 'bogus'"):
        load_config(write(tmp_path, "bogus = 1\n"))
    text = "[[candidates.sources]]\nmethod = 'm'\npath = 'x'\npaht = 'y'\n"
    with pytest.raises(ConfigError, match=r"candidates\.sources\.0\.paht"):
        load_config(write(tmp_path, text))


def test_wrong_type(tmp_path):
    with pytest.raises(ConfigError) as ei:
        load_config(write(tmp_path, "[timing]\niterations = 'many'\n"))
    assert "timing.iterations" in str(ei.value)
    with pytest.raises(ConfigError, match="timing.threads"):
        load_config(write(tmp_path, "[timing]\nthreads = 0\n"))


def test_missing_file_and_bad_toml(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(write(tmp_path, "[timing\n"))


def test_env_overrides_file_and_cli_overrides_env(tmp_path, monkeypatch):
    p = write(tmp_path, "[timing]\niterations = 250\nwarmup = 4\n")
    monkeypatch.setenv("MKB_TIMING__ITERATIONS", "300")
    cfg = load_config(p)
    assert cfg.timing.iterations == 300 and cfg.timing.warmup == 4
    cfg = load_config(p, ["--timing.iterations", "400"])
    assert cfg.timing.iterations == 400
    monkeypatch.setenv("MKB_TIMING__WARMUPP", "1")
    with pytest.raises(ConfigError, match="MKB_TIMING__WARMUPP|warmupp"):
        load_config(p)


def test_unknown_cli_override(tmp_path):
    with pytest.raises(ConfigError):
        load_config(write(tmp_path, ""), ["--timing.bogus", "1"])


def test_digest_ignores_paths_and_workers(tmp_path):
    a = load_config(write(tmp_path, "[dispatch]\nworkers = 1\n[run]\ndir = 'a'\n"))
    b = load_config(write(tmp_path, "[dispatch]\nworkers = 2\n[run]\ndir = 'b'\n"))
    c = load_config(write(tmp_path, "[timing]\niterations = 123\n"))
    assert a.digest() == b.digest() != c.digest()
    assert len(a.digest()) == 16


def test_reserved_native_method(tmp_path):
    with pytest.raises(ConfigError, match="reserved"):
        load_config(write(tmp_path, "[[candidates.sources]]\nmethod = 'native'\npath = 'x'\n"))


def test_cli_exit_code_2_names_key(tmp_path):
    p = write(tmp_path, "[timing]\nwarmupp = 3\n")
    res = subprocess.run([sys.executable, "-m", "kit.cli", "eval", "--config", str(p)], capture_output=True, text=True)
    assert res.returncode == 2
    assert "timing.warmupp" in res.stderr and str(p) in res.stderr


def test_evalconfig_default_constructible():
    assert isinstance(EvalConfig(), EvalConfig)


def test_unknown_section_in_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("MKB_TIMMING__WARMUP", "1")
    with pytest.raises(ConfigError, match="MKB_TIMMING__WARMUP"):
        load_config(write(tmp_path, ""))


def test_build_resource_needs_timing_resource_and_ray(tmp_path):
    with pytest.raises(ConfigError, match="dispatch.build_resource is set but dispatch.timing_resource is not"):
        load_config(write(tmp_path, "[dispatch]\nbuild_resource = 'x86'\n"))
    for mode in ("serial", "processes"):
        with pytest.raises(ConfigError, match='needs dispatch.mode = "ray"'):
            load_config(write(tmp_path, f"[dispatch]\nmode = '{mode}'\nbuild_resource = 'x86'\ntiming_resource = 'arm'\n"))
    cfg = load_config(write(tmp_path, "[dispatch]\nbuild_resource = 'x86'\ntiming_resource = 'aarch64'\n"))
    assert (cfg.dispatch.build_resource, cfg.dispatch.timing_resource) == ("x86", "aarch64")


@pytest.mark.parametrize("name", ["CPU", "GPU", "memory", "object_store_memory", "node:127.0.0.1", ""])
def test_dispatch_resources_must_be_custom(tmp_path, name):
    with pytest.raises(ConfigError, match="dispatch.timing_resource.*not a custom resource name"):
        load_config(write(tmp_path, ""), ["--dispatch.timing_resource", name])


def test_dispatch_address_forms(tmp_path):
    p = write(tmp_path, "")
    for ok in ("auto", "ray://head:10001", "10.0.0.5:6379", "head.example:6379"):
        assert load_config(p, ["--dispatch.address", ok]).dispatch.address == ok
    for bad in ("garbage", "host:", ":6379", "host:99999", "host:port",
                "ray://", "ray://head", "ray://head:", "ray://:10001", "ray://head:port", "ray://head/x:10001"):
        with pytest.raises(ConfigError, match="dispatch.address.*give 'auto'"):
            load_config(p, ["--dispatch.address", bad])


def test_error_names_the_command_line_or_environment_over_the_file(tmp_path, monkeypatch):
    """A key the file sets but an override replaced: the message names where the bad value came from."""
    p = write(tmp_path, "[dispatch]\nworkers = 2\n")
    with pytest.raises(ConfigError, match="'dispatch.workers' from the command line"):
        load_config(p, ["--dispatch.workers", "0"])
    monkeypatch.setenv("MKB_DISPATCH__WORKERS", "0")
    with pytest.raises(ConfigError, match="'dispatch.workers' from environment variable MKB_DISPATCH__WORKERS"):
        load_config(p)
    monkeypatch.delenv("MKB_DISPATCH__WORKERS")
    with pytest.raises(ConfigError, match=f"'dispatch.workers' in {p}"):
        load_config(write(tmp_path, "[dispatch]\nworkers = 0\n"))


def test_cross_field_errors_name_where_each_field_came_from(tmp_path, monkeypatch):
    """dispatch.build_resource given on the command line or in the environment, the file setting neither it nor
    timing_resource: the message names the override and says timing_resource is the default, never the file."""
    p = write(tmp_path, "[timing]\niterations = 10\n")
    with pytest.raises(ConfigError) as ei:
        load_config(p, ["--dispatch.build_resource", "build"])
    msg = str(ei.value)
    assert "'dispatch.build_resource' from the command line" in msg
    assert "'dispatch.timing_resource' (not set: the default)" in msg
    assert "timing_resource is not" in msg and str(p) not in msg

    monkeypatch.setenv("MKB_DISPATCH__BUILD_RESOURCE", "build")
    with pytest.raises(ConfigError) as ei:
        load_config(p)
    msg = str(ei.value)
    assert "'dispatch.build_resource' from environment variable MKB_DISPATCH__BUILD_RESOURCE" in msg
    assert str(p) not in msg

    # mode from the file, build_resource and timing_resource from the environment
    monkeypatch.setenv("MKB_DISPATCH__TIMING_RESOURCE", "arm")
    p = write(tmp_path, "[dispatch]\nmode = 'serial'\n")
    with pytest.raises(ConfigError, match='needs dispatch.mode = "ray"') as ei:
        load_config(p)
    msg = str(ei.value)
    assert "'dispatch.build_resource' from environment variable MKB_DISPATCH__BUILD_RESOURCE" in msg
    assert f"'dispatch.mode' in {p}" in msg
    # ... and mode from the command line over the file
    with pytest.raises(ConfigError, match="'dispatch.mode' from the command line"):
        load_config(write(tmp_path, ""), ["--dispatch.mode", "processes"])
    monkeypatch.delenv("MKB_DISPATCH__BUILD_RESOURCE")
    monkeypatch.delenv("MKB_DISPATCH__TIMING_RESOURCE")

    # both from the file: the file is named for each
    p = write(tmp_path, "[dispatch]\nbuild_resource = 'x86'\n")
    with pytest.raises(ConfigError) as ei:
        load_config(p)
    assert f"'dispatch.build_resource' in {p}" in str(ei.value)
    assert "'dispatch.timing_resource' (not set: the default)" in str(ei.value)


def test_a_whole_config_check_names_the_command_line_not_the_file(tmp_path):
    """candidates.sources given on the command line (the file has no [candidates]): not "in <file>"."""
    p = write(tmp_path, "[timing]\niterations = 10\n")
    src = '[{"method": "native", "path": "x"}]'
    with pytest.raises(ConfigError, match="reserved") as ei:
        load_config(p, ["--candidates.sources", src])
    assert "'candidates.sources' from the command line" in str(ei.value) and str(p) not in str(ei.value)


def test_timing_cores_must_match_the_thread_count(tmp_path):
    p = write(tmp_path, "[timing]\nthreads = 2\ncores = [1]\n")
    with pytest.raises(ConfigError, match="timing.cores .* must name timing.threads = 2 distinct") as ei:
        load_config(p)
    assert "'timing.cores'" in str(ei.value) and "'timing.threads'" in str(ei.value)
    assert load_config(write(tmp_path, "[timing]\nthreads = 2\ncores = [0, 1]\n")).timing.cores == [0, 1]
    with pytest.raises(ConfigError, match="timing.rounds"):
        load_config(write(tmp_path, "[timing]\nrounds = 1\n"))


def test_timing_cores_are_checked_where_a_worker_times_not_where_settings_are_made(tmp_path):
    """A node that only builds and verifies needs no timing cores: a bad ``timing.cores`` is a ConfigError
    naming the host when the timing options are pinned, not when the job settings are made."""
    import socket

    from kit.host import machine as hostinfo
    from kit.job.options import job_settings, pin_timing

    p = tmp_path / "cfg.toml"
    p.write_text(fixture_config_text(tmp_path / "run", cache_dir=tmp_path / "cache")
                 + f"[timing]\ncores = [{max(hostinfo.usable_cores()) + 1}]\n")
    cfg = load_config(p)
    opts = job_settings(cfg).timing  # no error: nothing is pinned yet
    assert opts.run.cpus == ()
    with pytest.raises(ConfigError, match=socket.gethostname()) as exc:
        pin_timing(opts, cfg)
    assert "timing.cores" in str(exc.value)
    ok = load_config(p, ["--timing.cores", f"[{hostinfo.usable_cores()[0]}]"])
    assert pin_timing(job_settings(ok).timing, ok).run.cpus == (hostinfo.usable_cores()[0],)


def test_every_subcommand_has_one_handler():
    """`mkb`'s parser and its handler table name the same subcommands (a subcommand without a handler would
    fail with a KeyError, one without a parser entry could never be reached)."""
    import argparse

    from kit import cli

    (sub,) = [a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(sub.choices) == set(cli._COMMANDS)
    assert cli.main(["merge", "/nonexistent/run-dir"]) == 2  # a user error through the table: exit 2
    # as nox's sessions run it: `python -m kit.cli`, where the module's own main runs before anything defined
    # below it
    ran = subprocess.run([sys.executable, "-m", "kit.cli", "merge", "/nonexistent/run-dir"], capture_output=True,
                         text=True, timeout=120)
    assert ran.returncode == 2 and ran.stderr.startswith("mkb: /nonexistent/run-dir"), ran.stderr
