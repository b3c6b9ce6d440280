"""Build only what a job needs (:mod:`kit.mnn.targets`): the targets per job kind, and on the fixture engine's
real build that an undefined symbol still fails the build (at the library's own link now) and that the
converter is rebuilt for a converter candidate and once after it, and not otherwise."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from conftest_fixture import FIXTURE_ROOT, fixture_config_text

from kit.host import proc
from kit.host.target import make_target
from kit.job.worker import setup_worker
from kit.mnn import build as mbuild
from kit.mnn import targets
from kit.results.outcomes import StageFailure
from kit.results.records import ErrorKind, Status
from kit.settings.config import load_config
from kit.stages import build as sbuild
from kit.suite.tasks import load_suite

X86 = make_target("x86_64", host_arch="x86_64")
ARM = make_target("aarch64", host_arch="x86_64")


def test_native_builds_make_libraries_runner_and_converter_only():
    assert targets.native_targets("mnn", X86) == ["MNN", "MNN_Express", "MNNConvert"]  # no tool executable
    assert targets.native_targets("fixture", X86) == ["MNN", "mkb_runner", "MNNConvert"]
    assert targets.native_targets("mnn", ARM) == ["MNN"]  # static libMNN.a (Express inside); the kit links the runner
    assert targets.native_targets("fixture", ARM) == ["MNN", "mkb_runner"]  # the host's converter converts


@pytest.mark.parametrize(("engine", "target", "changes", "stale", "want"), [
    ("mnn", X86, False, False, ["MNN", "MNN_Express"]),
    ("mnn", X86, True, False, ["MNN", "MNN_Express", "MNNConvert"]),
    ("mnn", X86, False, True, ["MNN", "MNN_Express", "MNNConvert"]),
    ("mnn", ARM, False, False, ["MNN"]),
    ("mnn", ARM, False, True, ["MNN"]),  # a cross workspace has no converter to rebuild
    ("fixture", X86, False, False, ["MNN"]),  # a shared build runs the native runner
    ("fixture", ARM, False, False, ["MNN", "mkb_runner"]),  # the static runner's link is the symbol check
])
def test_candidate_targets_per_job_kind(engine, target, changes, stale, want):
    assert targets.candidate_targets(engine, target, changes, stale) == want


def test_converter_sources_are_told_by_their_path():
    assert targets.changes_converter(["source/backend/cpu/CPUArgMax.cpp", "tools/converter/source/onnx/X.cpp"])
    assert not targets.changes_converter(["source/backend/cpu/CPUArgMax.cpp", "source/geometry/GeometryTile.cpp"])
    assert not targets.changes_converter([])


def test_shared_builds_refuse_undefined_symbols_static_ones_leave_it_to_the_runner(tmp_path):
    shared = mbuild.cmake_command(mbuild.BuildOptions(engine="mnn", cache_dir=tmp_path, target=X86), Path("SRC"))
    static = mbuild.cmake_command(mbuild.BuildOptions(engine="mnn", cache_dir=tmp_path, target=ARM), Path("SRC"))
    assert targets.NO_UNDEFINED in shared and targets.NO_UNDEFINED not in static


# -- the fixture engine's real build -------------------------------------------------------------------


@pytest.fixture(scope="module")
def worker(tmp_path_factory, fixture_engine_pristine):
    tmp = tmp_path_factory.mktemp("buildonly")
    cfg_path = tmp / "cfg.toml"
    cfg_path.write_text(fixture_config_text(tmp / "run", source_dir=fixture_engine_pristine, cache_dir=tmp / "cache")
                        + "[dispatch]\nmode = \"serial\"\n[timing]\nenabled = false\n")
    w = setup_worker(load_config(cfg_path))
    yield w
    w.release()


def _task(task_id: str):
    return next(t for t in load_suite(FIXTURE_ROOT / "tasks") if t.id == task_id)


def _sample(task_id: str, sample: str) -> dict[str, str]:
    d = FIXTURE_ROOT / "candidates" / "sample" / task_id / sample
    return {p.name: p.read_text() for p in d.iterdir()}


def _dry_run(worker, goal: str) -> str:
    """ninja's plan for ``goal`` in the worker's build directory (nothing is built)."""
    return proc.run(["ninja", "-n", goal], cwd=worker.workspace.build, timeout_s=60).stdout


@pytest.mark.slow  # the worker fixture builds the fixture engine (~40 s)
def test_an_undefined_member_fails_at_the_librarys_own_link(worker):
    files = _sample("fx_argmax", "correct")
    src = files["CPUArgMax.cpp"]
    marker = "const Tensor* x = inputs[0];"
    assert marker in src and "ErrorCode CPUArgMax::onExecute" in src
    files["CPUArgMax.cpp"] = (src.replace("ErrorCode CPUArgMax::onExecute", "ErrorCode helperNeverDefined();\n"
                                          "ErrorCode CPUArgMax::onExecute", 1)
                              .replace(marker, "helperNeverDefined();\n    " + marker, 1))
    with sbuild.candidate_in(worker.workspace, _task("fx_argmax"), files) as swap:
        assert sbuild.job_targets(worker.workspace, swap, worker.settings.build) == ["MNN"]  # no executable
        with pytest.raises(StageFailure) as exc:
            sbuild.build(worker.workspace, swap, worker.settings.build)
    f = exc.value
    assert (f.status, f.kind) == (Status.COMPILE_ERROR, ErrorKind.LINKER), f.message
    assert "helperNeverDefined" in f.message
    assert "FAILED: libMNN.so" in f.partial.log_tail  # the library refused it, no executable was linked


@pytest.mark.slow  # the worker fixture builds the fixture engine (~40 s)
def test_the_converter_is_rebuilt_for_a_converter_candidate_and_once_after_it(worker):
    ws, opts = worker.workspace, worker.settings.build
    with sbuild.candidate_in(ws, _task("fx_sub"), _sample("fx_sub", "correct")) as swap:
        assert swap.added and targets.changes_converter(swap.added)
        assert sbuild.job_targets(ws, swap, opts)[-1] == "MNNConvert"
        sbuild.build(ws, swap, opts)
        assert "no work to do" in _dry_run(worker, "MNNConvert")  # the candidate's converter, built
    # sources restored: the converter on disk is the candidate's, so the next build rebuilds it
    assert ws.state()[targets.CONVERTER_STATE] is True
    with sbuild.candidate_in(ws, _task("fx_exp"), _sample("fx_exp", "correct")) as swap:
        assert "no work to do" not in _dry_run(worker, "MNNConvert")
        assert sbuild.job_targets(ws, swap, opts) == ["MNN", "MNNConvert"]
        sbuild.build(ws, swap, opts)
    assert "no work to do" in _dry_run(worker, "MNNConvert")  # the pristine converter again
    assert ws.state()[targets.CONVERTER_STATE] is False
    with sbuild.candidate_in(ws, _task("fx_exp"), _sample("fx_exp", "correct")) as swap:
        assert sbuild.job_targets(ws, swap, opts) == ["MNN"]


@pytest.mark.slow  # the worker fixture builds the fixture engine (~40 s)
def test_a_workspace_configured_with_other_arguments_is_configured_afresh(worker):
    ws, opts = worker.workspace, worker.settings.build
    assert mbuild.configure(ws, opts) == 0.0  # configured with today's arguments: nothing to do
    other = replace(opts, cmake_args=(*opts.cmake_args, "-DMKB_UNUSED_FLAG=1"))
    assert mbuild.configure(ws, other) > 0.0
    assert "MKB_UNUSED_FLAG" in (ws.build / "CMakeCache.txt").read_text()
    assert mbuild.configure(ws, opts) > 0.0  # back: a fresh cache, the old value gone
    assert "MKB_UNUSED_FLAG" not in (ws.build / "CMakeCache.txt").read_text()
