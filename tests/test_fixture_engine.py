"""The fixture engine, built for real (cmake + ninja + g++): convert, verify against ONNX Runtime, time,
and the failure modes the kit must tell apart (compile error, link error, wrong result, crash, unsupported op).

One engine copy is built per module; tests that swap files restore them and rebuild before they return.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest_fixture import FIXTURE_ROOT, copy_fixture_engine, wait_for_state
from onnx import TensorProto, helper, numpy_helper

from kit.host import proc
from kit.mnn.tensorio import read_tensors, to_wire, write_tensors
from kit.results.records import ErrorKind
from kit.suite.compare import compare
from kit.suite.inputs import make_inputs
from kit.suite.reference import run_reference
from kit.suite.tasks import Task, load_suite

TASK_IDS = ("fx_argmax", "fx_exp", "fx_sub", "fx_transpose")
NATIVE_OK = ("fx_argmax", "fx_exp", "fx_transpose")  # fx_sub: the pristine converter has no Sub
SAMPLES = ("correct", "compile_error", "wrong_result", "crash")
_DIAG = re.compile(
    r"^(?P<file>[^\s:]+\.(?:cpp|hpp)):(?P<line>\d+):(?P<col>\d+): (?:fatal )?error: (?P<msg>.+)$",
    re.MULTILINE,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (shutil.which("cmake") and shutil.which("ninja") and shutil.which("g++")),
        reason="needs cmake, ninja and g++",
    ),
]


@dataclass
class Engine:
    src: Path
    build: Path
    work: Path  # scratch for models and tensors

    @property
    def converter(self) -> Path:
        return self.build / "MNNConvert"

    @property
    def runner(self) -> Path:
        return self.build / "mkb_runner"


def _run(
    argv: list[str | Path], cwd: Path, timeout_s: float = 300, env: dict[str, str] | None = None
) -> proc.ProcResult:
    return proc.run(argv, cwd=cwd, env=proc.base_env(env), timeout_s=timeout_s)


def _register(eng: Engine) -> None:
    res = _run([sys.executable, "tools/script/register.py", "."], eng.src)
    assert res.ok, res.output


def _configure(eng: Engine) -> None:
    res = _run(["cmake", "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", eng.src], eng.build)
    assert res.ok, res.output


def _ninja(eng: Engine) -> proc.ProcResult:
    return _run(["ninja", "-j2", "-k", "0"], eng.build, timeout_s=600)


@pytest.fixture(scope="module")
def tasks() -> dict[str, Task]:
    return {t.id: t for t in load_suite(FIXTURE_ROOT / "tasks")}


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    base = tmp_path_factory.mktemp("fxengine")
    eng = Engine(copy_fixture_engine(base / "src"), base / "build", base / "work")
    eng.build.mkdir()
    eng.work.mkdir()
    _register(eng)
    _configure(eng)
    res = _ninja(eng)
    assert res.ok, res.output
    return eng


@contextmanager
def swapped(eng: Engine, task: Task, sample: str, *, cmake: bool = True, method: str = "sample") -> Iterator[proc.ProcResult]:
    """Place the sample's files (``candidates/<method>/<task>/<sample>``), rerun register.py (and ``cmake .``
    for new files), build; yield the ninja result; afterwards restore the pristine files and rebuild."""
    sample_dir = FIXTURE_ROOT / "candidates" / method / task.id / sample
    backups: dict[Path, bytes | None] = {}
    for f in sorted(sample_dir.iterdir()):
        rel = task.place(f.name)
        assert rel is not None, f"{f.name} is not allowed for {task.id}"
        dest = eng.src / rel
        backups[dest] = dest.read_bytes() if dest.exists() else None
        dest.write_bytes(f.read_bytes())
    new_files = any(v is None for v in backups.values())
    try:
        _register(eng)
        if new_files and cmake:
            _configure(eng)
        yield _ninja(eng)
    finally:
        for dest, data in backups.items():
            if data is None:
                dest.unlink()
            else:
                dest.write_bytes(data)
        _register(eng)
        if new_files:
            _configure(eng)
        res = _ninja(eng)
        assert res.ok, "restoring the pristine engine failed:\n" + res.output


def convert(eng: Engine, task: Task, tag: str = "") -> tuple[proc.ProcResult, Path]:
    model = eng.work / f"{task.id}{tag}.fixmodel"
    model.unlink(missing_ok=True)
    res = _run(
        [
            eng.converter,
            "-f",
            "ONNX",
            "--modelFile",
            task.onnx_path,
            "--MNNModel",
            model,
            "--bizCode",
            "MNN",
            "--keepInputFormat=1",
        ],
        eng.work,
        timeout_s=60,
    )
    return res, model


def run_model(
    eng: Engine, task: Task, model: Path, seed: int, tag: str, *extra: str, env: dict[str, str] | None = None
) -> tuple[proc.ProcResult, dict[str, np.ndarray], Path]:
    """Write the task's seeded inputs, run mkb_runner; returns (result, inputs, out_dir)."""
    inputs = make_inputs(task, seed)
    in_dir, out_dir = eng.work / f"{task.id}{tag}_in{seed}", eng.work / f"{task.id}{tag}_out{seed}"
    shutil.rmtree(out_dir, ignore_errors=True)
    write_tensors(in_dir, {k: to_wire(k, v) for k, v in inputs.items()})
    res = _run(
        [
            eng.runner,
            model,
            in_dir,
            out_dir,
            "--outputs",
            ",".join(o.name for o in task.outputs),
            "--threads",
            "1",
            "--precision",
            "high",
            *extra,
        ],
        eng.work,
        timeout_s=60,
        env=env,
    )
    return res, inputs, out_dir


def verify(eng: Engine, task: Task, model: Path, seed: int, tag: str = "", env: dict[str, str] | None = None):
    """Run once and compare every output with ONNX Runtime; returns the list of Comparisons."""
    res, inputs, out_dir = run_model(eng, task, model, seed, tag, env=env)
    assert res.ok, res.output
    out = read_tensors(out_dir)
    ref = run_reference(task.onnx_path, inputs)
    assert list(out) == [o.name for o in task.outputs]
    return [compare(out[o.name], ref[o.name], task.tolerance.atol, task.tolerance.rtol) for o in task.outputs]


# ------------------------------------------------------------------------------------------ data files


def test_task_suite_loads_and_models_are_generated(tasks: dict[str, Task]) -> None:
    assert sorted(tasks) == sorted(TASK_IDS)
    assert {t.mechanism for t in tasks.values()} == {"atomic", "geometric", "composite"}
    res = _run([sys.executable, FIXTURE_ROOT / "make_tasks.py", "--check"], FIXTURE_ROOT, timeout_s=120)
    assert res.ok, "model.onnx files differ from make_tasks.py:\n" + res.output


def test_every_task_has_every_sample_and_files_are_allowed(tasks: dict[str, Task]) -> None:
    for tid, task in tasks.items():
        root = FIXTURE_ROOT / "candidates" / "sample" / tid
        assert sorted(p.name for p in root.iterdir()) == sorted(SAMPLES)
        for sample in SAMPLES:
            files = list((root / sample).iterdir())
            assert files, f"{tid}/{sample} is empty"
            for f in files:
                rel = task.place(f.name)
                assert rel is not None, f"{tid}/{sample}/{f.name} is outside the task's allowlist"
                if rel in task.mnn.files:
                    assert (FIXTURE_ROOT / rel).is_file()


def test_register_script_is_idempotent_on_the_committed_tree(tmp_path: Path) -> None:
    src = copy_fixture_engine(tmp_path / "e")
    before = {p: p.read_bytes() for p in src.rglob("*OPRegister.cpp")}
    assert len(before) == 2
    res = _run([sys.executable, "tools/script/register.py", "."], src)
    assert res.ok, res.output
    assert {p: p.read_bytes() for p in before} == before
    assert _run([sys.executable, "tools/script/register.py", tmp_path / "missing"], src).returncode == 2


# ------------------------------------------------------------------------------------ native engine


def test_build_outputs_and_runpath(engine: Engine) -> None:
    for f in (engine.build / "libMNN.so", engine.converter, engine.runner):
        assert f.is_file(), f
    dyn = _run(["readelf", "-d", engine.runner], engine.build)
    if dyn.ok:  # binutils present: the runner must use RUNPATH (LD_LIBRARY_PATH wins over it)
        assert "RUNPATH" in dyn.stdout and "libMNN.so" in dyn.stdout


@pytest.mark.parametrize("task_id", NATIVE_OK)
def test_native_converts_and_matches_onnxruntime(
    engine: Engine, tasks: dict[str, Task], task_id: str
) -> None:
    task = tasks[task_id]
    res, model = convert(engine, task)
    assert res.returncode == 0 and "Converted Success!" in res.stdout, res.output
    assert model.is_file()
    for seed in (0, 1):
        for c in verify(engine, task, model, seed):
            assert c.ok, c.reason


def test_argmax_output_is_int32(engine: Engine, tasks: dict[str, Task]) -> None:
    task = tasks["fx_argmax"]
    _, model = convert(engine, task)
    res, _, out_dir = run_model(engine, task, model, 0, "_dtype")
    assert res.ok, res.output
    assert (out_dir / "manifest.txt").read_text().split() == ["y", "int32", "2", "16", "64"]


def test_unsupported_op_fails_conversion_but_exits_zero(engine: Engine, tasks: dict[str, Task]) -> None:
    res, model = convert(engine, tasks["fx_sub"])
    assert res.returncode == 0
    assert "These Op Not Support: ONNX::Sub" in res.stdout
    assert "Converted Failed!" in res.stdout and "Converted Success!" not in res.stdout
    assert not model.exists()


def test_timing_mode_writes_samples(engine: Engine, tasks: dict[str, Task]) -> None:
    task = tasks["fx_transpose"]  # lowered by the geometry layer: the executed op is Raster
    _, model = convert(engine, task)
    res, inputs, out_dir = run_model(
        engine,
        task,
        model,
        0,
        "_time",
        "--warmup",
        "2",
        "--iterations",
        "7",
        "--op-types",
        ",".join(task.mnn_op_types),
        "--checked",
        "2",
    )
    assert res.ok, res.output
    timing = json.loads((out_dir / "timing.json").read_text())
    assert set(timing) == {"op_ms", "total_ms", "op_types", "phase_ms", "written_ms", "checked"}
    assert timing["written_ms"] >= timing["phase_ms"]  # timing.json is written last, after the outputs
    # forwards 2..7 ran on fresh inputs (one set: its values in another order); two of them, picked at random,
    # were written out with their inputs, and their outputs are right for those inputs
    assert len(set(timing["checked"])) == 2 and all(2 <= f <= 7 for f in timing["checked"])
    for j in range(2):
        fresh_in, fresh_out = read_tensors(out_dir / "checked" / str(j) / "in"), read_tensors(out_dir / "checked" / str(j) / "out")
        assert np.array_equal(np.sort(fresh_in["x"], axis=None), np.sort(inputs["x"], axis=None))
        assert not np.array_equal(fresh_in["x"], inputs["x"])
        assert compare(fresh_out["y"], run_reference(task.onnx_path, fresh_in)["y"], 0, 0).ok
    assert timing["op_types"] == {"Raster": 1}
    op_ms, total_ms = np.array(timing["op_ms"]), np.array(timing["total_ms"])
    assert op_ms.shape == total_ms.shape == (7,)
    assert (op_ms > 0).all() and (op_ms <= total_ms).all()
    assert total_ms.sum() <= timing["phase_ms"]  # the timed forwards are part of the phase (the same clock)
    # outputs are written in timing mode too
    ref = run_reference(task.onnx_path, inputs)
    assert compare(read_tensors(out_dir)["y"], ref["y"], 0, 0).ok

    res, _, out_dir = run_model(
        engine, task, model, 0, "_time_other", "--iterations", "3", "--op-types", "MatMul"
    )
    assert res.ok, res.output
    timing = json.loads((out_dir / "timing.json").read_text())
    assert timing["op_ms"] == [0.0, 0.0, 0.0] and all(t > 0 for t in timing["total_ms"])

    res, _, out_dir = run_model(engine, task, model, 0, "_time_all", "--iterations", "2", "--op-types", "*")
    assert res.ok, res.output
    assert all(t > 0 for t in json.loads((out_dir / "timing.json").read_text())["op_ms"])


def test_started_runner_waits_at_its_rendezvous_until_go(engine: Engine, tasks: dict[str, Task]) -> None:
    """``--wait-go 1`` (kit.mnn.runner.start_model): the runner loads the model and reads the inputs, says so,
    and runs nothing until "go"; a cancelled one leaves nothing behind."""
    from kit.mnn import runner as mrunner

    task = tasks["fx_exp"]
    _, model = convert(engine, task)
    inputs = make_inputs(task, 0)
    settings = mrunner.RunSettings(warmup=1, iterations=4, op_types=tuple(task.mnn_op_types), timeout_s=60)
    started = mrunner.start_model(engine.runner, model, inputs, ["y"], scratch=engine.work / "go", settings=settings)
    assert isinstance(started, mrunner.StartedRun)
    # blocked reading stdin (it may still be between printing the ready line and its read when start returns)
    assert wait_for_state(started.waiting.pid) == "S"
    assert not (engine.work / "go" / "out" / "timing.json").exists()  # nothing ran yet
    res = started.go()
    assert res.ok, res.error
    assert len(res.op_ms) == 4 and res.op_types == {"UnaryOp": 1}
    assert mrunner.READY_LINE not in res.proc.stdout
    ref = run_reference(task.onnx_path, inputs)
    assert compare(res.outputs["y"], ref["y"], task.tolerance.atol, task.tolerance.rtol).ok

    cancelled = mrunner.start_model(engine.runner, model, inputs, ["y"], scratch=engine.work / "cancel", settings=settings)
    assert isinstance(cancelled, mrunner.StartedRun)
    cancelled.cancel()
    assert not Path(f"/proc/{cancelled.waiting.pid}").exists()  # killed and reaped
    # a model it cannot load: the result of the failed start, no rendezvous
    garbage = engine.work / "garbage.mnn"
    garbage.write_bytes(b"not a model")
    failed = mrunner.start_model(engine.runner, garbage, inputs, ["y"], scratch=engine.work / "bad", settings=settings)
    assert isinstance(failed, mrunner.RunResult) and not failed.ok and failed.proc.returncode == 3


def test_the_runner_lists_proc_when_told_it_runs_in_a_pid_namespace(engine: Engine, tasks: dict[str, Task]) -> None:
    """``--pid-ns 1``, which the kit passes to a sandboxed runner (bubblewrap's own /proc shows one NSpid level,
    so the runner cannot tell): /proc is listed and the runner's parent must be the namespace's init.  Told so
    outside one (its parent is this test, /proc the host's), the runner stops at once with exit 7; sandboxed
    by the kit, it gets the flag and an honest run passes (only the init and the runner in its /proc)."""
    from kit.host import sandbox, sandbox_check
    from kit.mnn import runner as mrunner

    task = tasks["fx_exp"]
    _, model = convert(engine, task)
    told, _, _ = run_model(engine, task, model, 0, "_pidns", "--pid-ns", "1")
    assert told.returncode == mrunner.EXIT_PROCESS_LEFT, told.output
    assert "not the sandbox's init" in told.stderr
    plain, _, _ = run_model(engine, task, model, 0, "_nopidns")
    assert plain.ok, plain.output
    if sandbox_check.bwrap_works():
        pytest.skip(f"the sandboxed half needs bubblewrap: {sandbox_check.bwrap_works()}")
    settings = mrunner.RunSettings(warmup=1, iterations=4, op_types=tuple(task.mnn_op_types), timeout_s=60,
                                   policy=sandbox.Policy(enabled=True))
    res = mrunner.run_model(engine.runner, model, make_inputs(task, 0), ["y"], engine.build, settings=settings,
                            scratch=engine.work / "pidns_boxed")  # engine.build: its libMNN.so, shown in the sandbox
    assert res.ok, res.error
    assert "--pid-ns" in res.proc.argv and len(res.op_ms) == 4


def test_runner_reports_errors_with_exit_3_and_usage_with_exit_2(
    engine: Engine, tasks: dict[str, Task]
) -> None:
    task = tasks["fx_exp"]
    _, model = convert(engine, task)
    shape = tuple(task.inputs[0].shape)
    two = engine.work / "two_shapes_in"  # the first set's shape resizes the model; a second one is refused
    write_tensors(two / "0", {"x": np.zeros((0, *shape[1:]), np.float32)})
    write_tensors(two / "1", {"x": np.zeros(shape, np.float32)})
    res = _run([engine.runner, model, two, engine.work / "bad_out", "--outputs", "y"], engine.work)
    assert res.returncode == 3 and "does not match" in res.stderr
    in_dir = engine.work / "bad_in"
    write_tensors(in_dir, {"x": np.zeros(shape, np.float32)})
    res = _run([engine.runner, model, in_dir, engine.work / "bad_out", "--outputs", "nope"], engine.work)
    assert res.returncode == 3 and "'nope' is not an output" in res.stderr
    res = _run(
        [engine.runner, engine.work / "no_such.fixmodel", in_dir, engine.work / "bad_out", "--outputs", "y"],
        engine.work,
    )
    assert res.returncode == 3 and "cannot load model" in res.stderr
    (in_dir / "x.bin").write_bytes(b"\0" * 12)
    res = _run([engine.runner, model, in_dir, engine.work / "bad_out", "--outputs", "y"], engine.work)
    assert res.returncode == 3 and "x.bin" in res.stderr
    res = _run([engine.runner, model, in_dir, engine.work / "bad_out"], engine.work)
    assert res.returncode == 2 and "--outputs" in res.stderr
    res = _run(
        [engine.runner, model, in_dir, engine.work / "bad_out", "--outputs", "y", "--precision", "fp8"],
        engine.work,
    )
    assert res.returncode == 2


def _write_sets(eng: Engine, task: Task, seeds: tuple[int, ...], tag: str) -> tuple[Path, list[dict[str, np.ndarray]]]:
    """The task's inputs of ``seeds`` as input sets ``<in_dir>/0``, ``<in_dir>/1``, ...; returns (in_dir, sets)."""
    in_dir = eng.work / f"{task.id}{tag}_sets"
    shutil.rmtree(in_dir, ignore_errors=True)
    sets = [make_inputs(task, seed) for seed in seeds]
    for k, inputs in enumerate(sets):
        write_tensors(in_dir / str(k), {n: to_wire(n, a) for n, a in inputs.items()})
    return in_dir, sets


def _run_sets(eng: Engine, model: Path, in_dir: Path, tag: str, *extra: str) -> tuple[proc.ProcResult, Path]:
    out_dir = eng.work / f"{tag}_out"
    shutil.rmtree(out_dir, ignore_errors=True)
    return _run([eng.runner, model, in_dir, out_dir, "--outputs", "y", *extra], eng.work, timeout_s=60), out_dir


def test_several_input_sets_run_in_order_in_one_process(engine: Engine, tasks: dict[str, Task]) -> None:
    """in_dir/0, in_dir/1, ...: one forward per set, each set's outputs in out_dir/<k>; in timing mode the
    timed forwards alternate between the sets and the outputs of each set's last one are written."""
    task = tasks["fx_exp"]
    _, model = convert(engine, task)
    in_dir, sets = _write_sets(engine, task, (0, 1, 2), "_multi")
    refs = [run_reference(task.onnx_path, inputs)["y"] for inputs in sets]
    tol = (task.tolerance.atol, task.tolerance.rtol)
    res, out = _run_sets(engine, model, in_dir, "multi")
    assert res.ok, res.output
    assert sorted(p.name for p in out.iterdir()) == ["0", "1", "2"]
    assert all(compare(read_tensors(out / str(k))["y"], ref, *tol).ok for k, ref in enumerate(refs))

    res, out = _run_sets(engine, model, in_dir, "multi_time", "--warmup", "1", "--iterations", "5", "--op-types", "UnaryOp")
    assert res.ok, res.output
    timing = json.loads((out / "timing.json").read_text())
    assert len(timing["total_ms"]) == 5 and sum(timing["total_ms"]) <= timing["phase_ms"]
    assert all(compare(read_tensors(out / str(k))["y"], ref, *tol).ok for k, ref in enumerate(refs))

    res, _ = _run_sets(engine, model, in_dir, "multi_few", "--iterations", "2")  # fewer timed runs than sets
    assert res.returncode == 2 and "input sets" in res.stderr
    write_tensors(in_dir / "3", {"x": np.zeros((2, 2), np.float32)})  # a set with other tensors than the model's
    res, _ = _run_sets(engine, model, in_dir, "multi_bad")
    assert res.returncode == 3 and "does not match" in res.stderr


@pytest.mark.parametrize(("sample", "code", "message"), [
    ("writes_input", 4, "input 'x' was modified by run 1"),
    ("thread_left", 5, "2 threads after run 1"),
])
def test_runner_stops_a_kernel_that_writes_its_input_or_leaves_a_thread(
    engine: Engine, tasks: dict[str, Task], sample: str, code: int, message: str
) -> None:
    task = tasks["fx_exp"]
    _, model = convert(engine, task)
    with swapped(engine, task, sample, method="hostile") as build:
        assert build.ok, build.output
        in_dir, _ = _write_sets(engine, task, (0, 1), f"_{sample}")
        for extra in ((), ("--iterations", "2")):
            res, _ = _run_sets(engine, model, in_dir, sample, *extra)
            assert res.returncode == code and message in res.stderr, res.output


def test_runner_fills_the_outputs_before_every_forward(engine: Engine, tasks: dict[str, Task]) -> None:
    """A kernel correct on its first call only (later calls write nothing) leaves the runner's NaN fill in the
    second set's output: neither the first set's result nor zeros."""
    task = tasks["fx_exp"]
    _, model = convert(engine, task)
    with swapped(engine, task, "correct_first_call", method="hostile") as build:
        assert build.ok, build.output
        in_dir, sets = _write_sets(engine, task, (0, 1), "_first")
        res, out = _run_sets(engine, model, in_dir, "first")
        assert res.ok, res.output
        ref0 = run_reference(task.onnx_path, sets[0])["y"]
        assert compare(read_tensors(out / "0")["y"], ref0, task.tolerance.atol, task.tolerance.rtol).ok
        assert np.isnan(read_tensors(out / "1")["y"]).all()


def test_runner_clock_is_out_of_the_librarys_reach(engine: Engine, tasks: dict[str, Task]) -> None:
    """The candidate's library defines clock_gettime, gettimeofday and syscall (each aborts): the runner's
    timings never call them."""
    task = tasks["fx_exp"]
    _, model = convert(engine, task)
    with swapped(engine, task, "clock_hook", method="hostile") as build:
        assert build.ok, build.output
        in_dir, _ = _write_sets(engine, task, (0, 1), "_clock")
        res, out = _run_sets(engine, model, in_dir, "clock", "--warmup", "1", "--iterations", "4", "--op-types", "UnaryOp")
        assert res.ok and res.signal is None, res.output
        timing = json.loads((out / "timing.json").read_text())
        assert all(t > 0 for t in timing["op_ms"]) and timing["phase_ms"] >= sum(timing["total_ms"])


def _one_node_model(
    path: Path,
    op: str,
    inputs: dict[str, tuple[int, ...]],
    out_shape: tuple[int, ...],
    consts: dict[str, np.ndarray] | None = None,
    **attrs: object,
) -> Path:
    consts = consts or {}
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()]
    node = helper.make_node(op, [*inputs, *consts], ["y"], name=f"{op}_0", **attrs)
    graph = helper.make_graph(
        [node],
        op,
        vi,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
        initializer=[numpy_helper.from_array(v, n) for n, v in consts.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


OTHER_OPS = {
    "softmax_axis1": ("Softmax", {"x": (3, 5, 7)}, (3, 5, 7), None, {"axis": 1}),
    "reducesum_keep": ("ReduceSum", {"x": (3, 4, 5)}, (1, 4, 1), {"axes": np.array([0, -1], np.int64)}, {}),
    "reducesum_all": ("ReduceSum", {"x": (3, 4, 5)}, (), None, {"keepdims": 0}),
    "matmul": ("MatMul", {"a": (5, 7), "b": (7, 3)}, (5, 3), None, {}),
    "neg_extra": ("Neg", {"x": (4, 6)}, (4, 6), None, {}),
    "abs": ("Abs", {"x": (4, 6)}, (4, 6), None, {}),
    "add_broadcast": ("Add", {"a": (2, 1, 4), "b": (3, 1)}, (2, 3, 4), None, {}),
    "mul_const": ("Mul", {"x": (3, 4)}, (3, 4), {"w": np.array([0.5, -2.0, 3.0, 1e-3], np.float32)}, {}),
}


@pytest.mark.parametrize("case", sorted(OTHER_OPS))
def test_other_kernels_match_onnxruntime(engine: Engine, case: str) -> None:
    op, inputs, out_shape, consts, attrs = OTHER_OPS[case]
    onnx_path = _one_node_model(engine.work / f"{case}.onnx", op, inputs, out_shape, consts, **attrs)
    model = engine.work / f"{case}.fixmodel"
    res = _run(
        [engine.converter, "-f", "ONNX", "--modelFile", onnx_path, "--MNNModel", model, "--bizCode", "MNN"],
        engine.work,
    )
    assert "Converted Success!" in res.stdout, res.output
    rng = np.random.default_rng(7)
    feeds = {n: rng.uniform(-2, 2, size=s).astype(np.float32) for n, s in inputs.items()}
    in_dir, out_dir = engine.work / f"{case}_in", engine.work / f"{case}_out"
    write_tensors(in_dir, feeds)
    res = _run([engine.runner, model, in_dir, out_dir, "--outputs", "y"], engine.work)
    assert res.ok, res.output
    ref = run_reference(onnx_path, feeds)["y"]
    out = read_tensors(out_dir)["y"]
    c = compare(out, ref, 1e-5, 1e-5)
    assert c.ok, c.reason


# ---------------------------------------------------------------------------------------- candidates


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_correct_candidate_builds_and_verifies(engine: Engine, tasks: dict[str, Task], task_id: str) -> None:
    task = tasks[task_id]
    with swapped(engine, task, "correct") as build:
        assert build.ok, build.output
        res, model = convert(engine, task, "_correct")
        assert "Converted Success!" in res.stdout, res.output
        for seed in (0, 1, 2):
            for c in verify(engine, task, model, seed, "_correct"):
                assert c.ok, c.reason


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_compile_error_candidate_fails_with_gcc_diagnostic(
    engine: Engine, tasks: dict[str, Task], task_id: str
) -> None:
    task = tasks[task_id]
    with swapped(engine, task, "compile_error") as build:
        assert not build.ok
        diags = [m.groupdict() for m in _DIAG.finditer(build.output)]
        assert diags, build.output
        if task_id == "fx_exp":
            # the candidate removed CPUUnary::selectForFloat, which CPUSoftmax.cpp uses
            assert any(
                d["file"].endswith("CPUSoftmax.cpp") and "selectForFloat" in d["msg"] for d in diags
            ), diags
        else:
            sample_files = {
                f.name for f in (FIXTURE_ROOT / "candidates/sample" / task_id / "compile_error").iterdir()
            }
            assert any(Path(d["file"]).name in sample_files for d in diags), diags


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_wrong_result_candidate_builds_but_mismatches(
    engine: Engine, tasks: dict[str, Task], task_id: str
) -> None:
    task = tasks[task_id]
    with swapped(engine, task, "wrong_result") as build:
        assert build.ok, build.output
        res, model = convert(engine, task, "_wrong")
        assert "Converted Success!" in res.stdout, res.output
        comparisons = verify(engine, task, model, 0, "_wrong")
        assert [c.kind for c in comparisons] == [ErrorKind.VALUE], comparisons


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_crash_candidate_dies_by_a_signal(engine: Engine, tasks: dict[str, Task], task_id: str) -> None:
    task = tasks[task_id]
    with swapped(engine, task, "crash") as build:
        assert build.ok, build.output
        res, model = convert(engine, task, "_crash")
        if task.mechanism == "composite":  # the crash is in the converter's rewrite
            assert res.signal == signal.SIGSEGV, res
            assert not model.exists()
            return
        assert "Converted Success!" in res.stdout, res.output
        res, _, _ = run_model(engine, task, model, 0, "_crash")
        assert res.signal == signal.SIGSEGV, res


# ------------------------------------------------------------------------------ MNN-like build rules


def test_new_converter_file_needs_cmake_rerun(engine: Engine, tasks: dict[str, Task]) -> None:
    task = tasks["fx_sub"]
    with swapped(engine, task, "correct", cmake=False) as build:
        assert build.ok, build.output
        res, _ = convert(engine, task, "_nocmake")
        assert "Converted Failed!" in res.stdout, "a new file was compiled without rerunning cmake (GLOB)"
        _configure(engine)
        build = _ninja(engine)
        assert build.ok, build.output
        res, _ = convert(engine, task, "_cmake")
        assert "Converted Success!" in res.stdout, res.output


def test_unregistered_creator_fails_the_executable_link(engine: Engine) -> None:
    path = engine.src / "source/backend/cpu/CPUArgMax.cpp"
    original = path.read_bytes()
    try:
        text = original.decode().replace("CPUArgMaxCreator", "CPUArgMaxCreatorV2")
        path.write_text(text)
        build = _ninja(engine)  # register.py NOT rerun: CPUOPRegister.cpp calls the old name
        assert not build.ok
        assert (
            "undefined reference" in build.output and "___CPUArgMaxCreator__OpType_ArgMax__" in build.output
        )
        assert "mkb_runner" in build.output  # libMNN.so itself links; the executable does not
        _register(engine)
        build = _ninja(engine)
        assert build.ok, build.output
    finally:
        path.write_bytes(original)
        _register(engine)
        assert _ninja(engine).ok


def test_ld_library_path_selects_the_engine_library(engine: Engine, tasks: dict[str, Task]) -> None:
    task = tasks["fx_argmax"]
    native = engine.work / "native_lib"
    native.mkdir(exist_ok=True)
    shutil.copy2(engine.build / "libMNN.so", native / "libMNN.so")
    _, model = convert(engine, task, "_ldp")
    with swapped(engine, task, "wrong_result") as build:
        assert build.ok, build.output
        assert [c.kind for c in verify(engine, task, model, 0, "_ldp_cand")] == [ErrorKind.VALUE]
        assert all(
            c.ok for c in verify(engine, task, model, 0, "_ldp_native", env={"LD_LIBRARY_PATH": str(native)})
        )


def test_timing_run_streams_its_stamps(engine: Engine, tasks: dict[str, Task]) -> None:
    """Every timed forward's begin, its selected ops and its end come on stderr as the runner takes them
    (kit.mnn.stamps); the kit's samples are the stream's, agree with timing.json, and the lines are taken out of
    the stderr the records see."""
    from kit.mnn import runner as mrunner
    from kit.mnn import stamps

    task = tasks["fx_transpose"]
    _, model = convert(engine, task, "_stamps")
    settings = mrunner.RunSettings(warmup=2, iterations=6, op_types=tuple(task.mnn_op_types), timeout_s=60)
    res = mrunner.run_model(engine.runner, model, make_inputs(task, 0), ["y"], scratch=engine.work / "stamps",
                            settings=settings)
    assert res.ok and res.stamp_error == "", res.stamp_error or res.error
    assert stamps.PREFIX not in res.proc.stderr and stamps.PREFIX not in res.proc.stdout
    timing = json.loads(res.timing_path.read_text())
    assert len(res.op_ms) == len(res.total_ms) == 6
    assert np.allclose(res.op_ms, timing["op_ms"], atol=1e-3) and np.allclose(res.total_ms, timing["total_ms"], atol=1e-3)
    assert all(0 < op <= tot for op, tot in zip(res.op_ms, res.total_ms))

    # the raw stream: 6 forwards, every op stamped with its type in each (no stamp from warm-ups), as many as
    # timing.json counts
    raw = _run([*res.proc.argv], engine.work)
    lines, _ = stamps.split(raw.stderr)
    ops = sum(timing["op_types"].values())
    assert raw.ok and ops >= 1 and len(lines) == 6 * (2 + 2 * ops), raw.output
    assert stamps.parse(lines, 6).op_counts == [timing["op_types"]] * 6
