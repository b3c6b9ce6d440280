"""A timing worker of an aarch64 target (kit.job.timing_worker): natively on an aarch64 node, under qemu on an x86_64 node
that stands in for one; the ELF machine check of the baseline it is shipped; and the build mode of a native
aarch64 build node.  The node's architecture is injected where this host is not the one a test is about
(kit.host.target derives the build mode, the emulator and the runner from it); the binaries are real ones, built here
by the host's and the cross compiler and run by the real emulator."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from kit.host import machine as hostinfo
from kit.host import proc
from kit.host.shipping import ArtefactError, Bundle, pack
from kit.host.target import TargetError, make_target
from kit.job.artefacts import BuildHalf, Built
from kit.job.options import job_settings
from kit.job.pipeline import time_job
from kit.job.record import Job
from kit.job.timing_worker import setup_timing_worker
from kit.mnn import build as mbuild
from kit.mnn import targets as mtargets
from kit.mnn import toolchain
from kit.results.outcomes import Outcome, Where
from kit.results.records import ErrorKind, Status
from kit.settings.config import EvalConfig
from kit.suite.tasks import load_suite

FIXTURE_TASKS = Path(__file__).resolve().parent / "fixture_engine" / "tasks"
ON_X86 = pytest.mark.skipif(hostinfo.host_arch() != "x86_64", reason="the x86_64 host's cross toolchain")


def _cfg(tmp_path: Path, engine: str = "fixture") -> EvalConfig:
    return EvalConfig(mnn={"cache_dir": tmp_path / "cache", "engine": engine}, target={"arch": "aarch64"},
                      dispatch={"mode": "ray", "build_resource": "build", "timing_resource": "aarch64"})


def _static_aarch64(tmp_path: Path) -> Path:
    """A static aarch64 executable (as a cross build's runner is), compiled by the cross compiler."""
    cc = toolchain.CROSS_COMPILERS["aarch64"][1]
    if shutil.which(cc) is None:
        pytest.skip(f"needs {cc} (Debian: g++-aarch64-linux-gnu)")
    (tmp_path / "m.c").write_text("int main(void) { return 7; }\n")
    out = tmp_path / "runner-aarch64"
    res = proc.run([cc, "-static", "-O1", str(tmp_path / "m.c"), "-o", str(out)], timeout_s=120)
    assert res.ok, res.output
    return out


def _emulator_or_skip() -> None:
    try:
        toolchain.emulator(make_target("aarch64", host_arch="x86_64"))
    except TargetError as exc:
        pytest.skip(str(exc))


@ON_X86
def test_an_x86_node_times_an_aarch64_target_under_qemu(tmp_path):
    _emulator_or_skip()
    runner = _static_aarch64(tmp_path)
    timer = setup_timing_worker(_cfg(tmp_path), 0, "nabc.t0", "k1", pack({"bin/mkb_runner": runner}))
    assert timer.target.arch == "aarch64" and timer.target.emulated
    assert timer.static and timer.how == "under qemu-aarch64-static"
    run = timer.settings.timing.run
    assert Path(run.emulator[0]).name == "qemu-aarch64-static" and run.extra_threads == toolchain.EMULATOR_THREADS
    assert run.runner_label == "static aarch64 mkb_runner, one per side" and timer.settings.verify.run == run
    assert not (timer.native_dir / "lib").exists()
    timer.check_native(None)  # a static baseline: the runner alone is sealed
    # the emulator this timer runs its runs behind really runs what it was shipped
    assert proc.run([*run.emulator, str(timer.runner)], timeout_s=60).returncode == 7


@ON_X86
def test_a_shipped_baseline_of_another_machine_is_refused_naming_the_file_and_both_machines(tmp_path):
    _emulator_or_skip()
    x86 = Path(sys.executable).resolve()
    with pytest.raises(ArtefactError) as e:
        setup_timing_worker(_cfg(tmp_path), 0, "nabc.t0", "k1", pack({"bin/mkb_runner": x86}))
    msg = str(e.value)
    assert "the native baseline k1: bin/mkb_runner was built for x86_64 (ELF machine EM_X86_64)" in msg
    assert "runs aarch64 under qemu-aarch64-static (ELF machine EM_AARCH64)" in msg
    assert not (tmp_path / "cache" / "shipped" / "k1").exists()  # refused before anything was written


def test_a_timing_node_that_cannot_run_the_target_is_refused(tmp_path, monkeypatch):
    make_target("aarch64", host_arch="aarch64").check_runs_here()
    make_target("aarch64", host_arch="x86_64").check_runs_here()  # emulated
    for target, node in (("x86_64", "aarch64"), ("aarch64", "riscv64")):
        with pytest.raises(TargetError, match=f"target.arch = '{target}': this timing node is {node}"):
            make_target(target, host_arch=node).check_runs_here()
    monkeypatch.setattr(hostinfo, "host_arch", lambda: "riscv64")
    with pytest.raises(TargetError, match="this timing node is riscv64"):
        setup_timing_worker(_cfg(tmp_path), 0, "nabc.t0", "k1", Bundle({}))
    assert not (tmp_path / "cache" / "shipped").exists()


def test_an_aarch64_timing_node_runs_the_shipped_static_runners_natively(tmp_path, monkeypatch):
    runner = _static_aarch64(tmp_path)
    monkeypatch.setattr(hostinfo, "host_arch", lambda: "aarch64")
    timer = setup_timing_worker(_cfg(tmp_path), 0, "nabc.t0", "k1", pack({"bin/mkb_runner": runner}))
    assert not timer.target.cross and timer.how == "natively" and timer.static
    run = timer.settings.timing.run
    # no emulator and its thread; the label still names the per-side runners (a cross build node built them)
    assert run.emulator == () and run.extra_threads == 0
    assert run.runner_label == "static aarch64 mkb_runner, one per side"


def test_a_native_aarch64_build_node_builds_natively_with_nothing_of_x86(tmp_path, monkeypatch):
    monkeypatch.setattr(hostinfo, "host_arch", lambda: "aarch64")
    cfg = _cfg(tmp_path, engine="mnn")
    t = cfg.target_info()
    assert (t.host_arch, t.cross, t.build_mode, t.static, t.emulated) == ("aarch64", False, "native", False, False)
    assert t.describe() == {"target_arch": "aarch64", "build_mode": "native", "timing_device": "ray:aarch64"}
    assert cfg.digest_payload()["target"]["build_mode"] == "native"
    toolchain.check_tools(t)  # no cross compiler, sysroot or emulator needed
    s = job_settings(cfg)
    assert s.target == t and s.verify.run.emulator == () and s.verify.run.runner_label == ""
    argv = mbuild.cmake_command(s.build, Path("SRC"))
    assert not any(a.startswith("-DCMAKE_TOOLCHAIN_FILE") for a in argv)
    assert {"-DMNN_BUILD_CONVERTER=ON", "-DMNN_BUILD_TOOLS=ON"} <= set(argv)  # the converter built on the node
    assert toolchain.cxx(t) == "c++" and mtargets.native_targets("mnn", t) == ["MNN", "MNN_Express", "MNNConvert"]
    host = s.build.host().target  # (the build-host half a cross target would have: the node itself)
    assert (host.arch, host.host_arch, host.cross) == ("aarch64", "aarch64", False)


def test_the_record_says_the_build_mode_of_the_node_that_built(tmp_path):
    """A driver on x86_64 makes the jobs (its target says ``cross``); built on an aarch64 node, the record says
    ``native`` (the build half's ``arch``), here through a timing half that ends at once."""
    task = load_suite(FIXTURE_TASKS, "all", ["fx_argmax"])[0]
    job = Job(task, "m", "s0", "ab" * 32, "cfgdigest", files={},
              target=make_target("aarch64", timing_resource="aarch64", host_arch="x86_64"))
    assert job.target.build_mode == "cross"
    built = Built(half=BuildHalf(Where(arch="aarch64", worker="nabc.w0"), Outcome(), wall_s=1.0), libs=Bundle({}),
                  model=b"m", native_model=None, native_key="other", built_by="nabc.w0")
    timer_cfg = EvalConfig(mnn={"cache_dir": tmp_path / "cache", "engine": "fixture"})
    from kit.job.timing_worker import TimingWorker

    rec = time_job(job, built, TimingWorker(timer_cfg, tmp_path / "shipped", "k1", name="ndef.t0"))
    assert rec.status is Status.HARNESS_ERROR and rec.error_kind is ErrorKind.ARTEFACT
    assert (rec.target_arch, rec.build_mode, rec.timing_device) == ("aarch64", "native", "ray:aarch64")


def test_build_and_timing_workers_are_both_places_that_time():
    """Every member of :class:`kit.job.place.TimingPlace` is on both kinds of worker: the pipeline times and
    verifies again through that surface alone."""
    from kit.job.place import TimingPlace
    from kit.job.timing_worker import TimingWorker
    from kit.job.worker import Worker

    members = {name for name in vars(TimingPlace) if not name.startswith("_")}
    assert members == {"settings", "timing", "runner", "gate", "baselines", "device"}
    for cls in (Worker, TimingWorker):
        assert [m for m in sorted(members) if not hasattr(cls, m) and m not in cls.__dataclass_fields__] == [], cls
