"""The kit's runner on a real MNN tree: build, convert, verify against ONNX Runtime, timing mode, library swap.

Needs ``MKB_MNN__SOURCE_DIR`` (an MNN 3.2.2 source tree; skipped otherwise).  Uses the build dir
``MKB_TEST_MNN_BUILD_DIR`` when set, else the kit's own workspace build of the tree (built on first use).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from conftest_fixture import wait_for_state
from onnx import TensorProto, helper, numpy_helper

from kit.host import sandbox, sandbox_check
from kit.mnn import convert as mconvert
from kit.mnn import fresh as mfresh
from kit.mnn import runner as mr
from kit.suite.compare import compare

pytestmark = pytest.mark.mnn

SRC = os.environ.get("MKB_MNN__SOURCE_DIR")
BUILD = os.environ.get("MKB_TEST_MNN_BUILD_DIR")
if not SRC:
    pytest.skip("needs MKB_MNN__SOURCE_DIR", allow_module_level=True)
SRC_DIR, BUILD_DIR = Path(SRC), Path(BUILD or "")


@pytest.fixture(scope="module", autouse=True)
def _mnn_dirs():
    """The build dir: MKB_TEST_MNN_BUILD_DIR if set, else the kit's own workspace build of the tree."""
    global SRC_DIR, BUILD_DIR
    worker = None
    if not BUILD:
        from kit.job.worker import setup_worker
        from kit.settings.config import load_config

        worker = setup_worker(load_config())
        SRC_DIR, BUILD_DIR = worker.workspace.src, worker.workspace.build
    if not (BUILD_DIR / "libMNN.so").is_file() or not (BUILD_DIR / "MNNConvert").is_file():
        pytest.skip(f"{BUILD_DIR} has no libMNN.so/MNNConvert")
    yield
    if worker is not None:
        worker.workspace.release()


F32, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(node, inputs, outputs, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        initializer=list(initializers),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model


def _rng_inputs(specs, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for name, kind, shape, *bounds in specs:
        if kind == "f":
            out[name] = rng.uniform(-2.0, 2.0, size=shape).astype(np.float32)
        else:
            lo, hi = bounds
            out[name] = rng.integers(lo, hi, size=shape).astype(np.int64)
    return out


# name -> (model, inputs, output names)
CASES = {
    "argmax": (
        _model(
            helper.make_node("ArgMax", ["x"], ["y"], axis=1, keepdims=0),
            [("x", F32, [3, 17, 5])],
            [("y", I64, [3, 5])],
        ),
        [("x", "f", (3, 17, 5))],
        ["y"],
    ),
    "softmax": (
        _model(
            helper.make_node("Softmax", ["x"], ["y"], axis=-1), [("x", F32, [4, 33])], [("y", F32, [4, 33])]
        ),
        [("x", "f", (4, 33))],
        ["y"],
    ),
    "add_broadcast": (
        _model(
            helper.make_node("Add", ["a", "b"], ["y"]),
            [("a", F32, [2, 3, 4]), ("b", F32, [3, 1])],
            [("y", F32, [2, 3, 4])],
        ),
        [("a", "f", (2, 3, 4)), ("b", "f", (3, 1))],
        ["y"],
    ),
    "maxpool": (
        _model(
            helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
            [("x", F32, [1, 5, 9, 9])],
            [("y", F32, [1, 5, 5, 5])],
        ),
        [("x", "f", (1, 5, 9, 9))],
        ["y"],
    ),
    "matmul": (
        _model(
            helper.make_node("MatMul", ["a", "b"], ["y"]),
            [("a", F32, [6, 10]), ("b", F32, [10, 7])],
            [("y", F32, [6, 7])],
        ),
        [("a", "f", (6, 10)), ("b", "f", (10, 7))],
        ["y"],
    ),
    "topk": (
        _model(
            helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=-1),
            [("x", F32, [3, 20])],
            [("values", F32, [3, 4]), ("indices", I64, [3, 4])],
            [numpy_helper.from_array(np.array([4], dtype=np.int64), "k")],
        ),
        [("x", "f", (3, 20))],
        ["values", "indices"],
    ),
    "gather_int64_indices": (
        _model(
            helper.make_node("Gather", ["data", "idx"], ["y"], axis=0),
            [("data", F32, [10, 3]), ("idx", I64, [4])],
            [("y", F32, [4, 3])],
        ),
        [("data", "f", (10, 3)), ("idx", "i", (4,), 0, 10)],
        ["y"],
    ),
    "concat": (
        _model(
            helper.make_node("Concat", ["a", "b"], ["y"], axis=1),
            [("a", F32, [2, 3, 4]), ("b", F32, [2, 5, 4])],
            [("y", F32, [2, 8, 4])],
        ),
        [("a", "f", (2, 3, 4)), ("b", "f", (2, 5, 4))],
        ["y"],
    ),
}


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("runner_mnn")


@pytest.fixture(scope="module")
def runner_bin(work) -> Path:
    return mr.build_runner(SRC_DIR, BUILD_DIR, work / "bin" / "mkb_runner", timeout_s=300)


@pytest.fixture(scope="module")
def converted(work) -> dict[str, tuple[Path, Path]]:
    """case name -> (onnx path, mnn path), converted once per module."""
    result = {}
    for name, (model, _, _) in CASES.items():
        onnx_path = work / "models" / f"{name}.onnx"
        onnx_path.parent.mkdir(parents=True, exist_ok=True)
        onnx.save(model, onnx_path)
        conv = mconvert.convert(BUILD_DIR / "MNNConvert", onnx_path, work / "models" / f"{name}.mnn", mconvert.ConvertOptions(timeout_s=120))
        assert conv.ok, f"{name}: {conv.reason}\n{conv.log}"
        assert conv.unsupported_ops == ()
        result[name] = (onnx_path, conv.model_path)
    return result


def _reference(onnx_path: Path, inputs: dict[str, np.ndarray], names: list[str]) -> dict[str, np.ndarray]:
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    return dict(zip(names, sess.run(names, inputs)))


def test_build_runner_is_cached_by_key_and_reports_compiler_failures(work, runner_bin):
    assert os.access(runner_bin, os.X_OK)
    key_file = runner_bin.with_name(runner_bin.name + ".key")
    assert key_file.read_text().strip() == mr.runner_key(SRC_DIR.resolve(), BUILD_DIR.resolve())
    mtime = runner_bin.stat().st_mtime_ns
    assert mr.build_runner(SRC_DIR, BUILD_DIR, runner_bin) == runner_bin
    assert runner_bin.stat().st_mtime_ns == mtime  # up to date: not rebuilt
    with pytest.raises(mr.RunnerBuildError, match="failed") as info:
        mr.build_runner(SRC_DIR, BUILD_DIR, work / "bin" / "broken", compiler="false")
    assert info.value.proc is not None and info.value.proc.returncode != 0
    assert not (work / "bin" / "broken").exists()
    with pytest.raises(FileNotFoundError, match="libMNN.so"):
        mr.build_runner(SRC_DIR, work, work / "bin" / "nolibs")


@pytest.mark.parametrize("case", sorted(CASES))
def test_verify_mode_matches_onnxruntime(case, runner_bin, converted, work):
    onnx_path, mnn_path = converted[case]
    _, specs, outputs = CASES[case]
    inputs = _rng_inputs(specs, seed=1)
    res = mr.run_model(runner_bin, mnn_path, inputs, outputs, settings=mr.RunSettings(threads=1, precision="high", timeout_s=60), scratch=work / "run" / case)
    assert res.ok, res.error
    assert res.op_ms == [] and res.total_ms == []
    ref = _reference(onnx_path, inputs, outputs)
    assert list(res.outputs) == outputs
    for name in outputs:
        if ref[name].dtype == np.int64:
            assert res.outputs[name].dtype == np.int32  # MNN has no int64 tensors
        cmp = compare(res.outputs[name], ref[name], atol=1e-4, rtol=1e-4)
        assert cmp.ok, f"{case}/{name}: {cmp.reason}"


def test_timing_mode_counts_ops_and_times_selected_types(runner_bin, converted, work):
    _, mnn_path = converted["softmax"]
    inputs = _rng_inputs(CASES["softmax"][1])
    n = 4
    sel = mr.run_model(runner_bin, mnn_path, inputs, ["y"], settings=mr.RunSettings(threads=1, warmup=1, iterations=n, op_types=("Softmax",), timeout_s=60), scratch=work / "timing_sel")
    assert sel.ok, sel.error
    # the samples are the stamp stream's (kit.mnn.stamps), which timing.json agrees with; none left in stderr
    assert sel.stamp_error == "" and "@mkbt" not in sel.proc.stderr, sel.stamp_error
    assert len(sel.op_ms) == n and len(sel.total_ms) == n
    assert sel.op_types.get("Softmax") == 1
    assert all(0 < o <= t for o, t in zip(sel.op_ms, sel.total_ms))
    assert sel.timing_path is not None and sel.timing_path.is_file()
    # the outputs of timing mode are the model's outputs too
    ref = _reference(converted["softmax"][0], inputs, ["y"])
    assert compare(sel.outputs["y"], ref["y"]).ok

    none = mr.run_model(runner_bin, mnn_path, inputs, ["y"], settings=mr.RunSettings(iterations=2, op_types=("NoSuchOp",), timeout_s=60), scratch=work / "timing_none")
    assert none.ok and none.op_ms == [0.0, 0.0] and all(t > 0 for t in none.total_ms)
    assert none.stamp_error == "", none.stamp_error


def test_started_runner_runs_only_after_go(runner_bin, converted, work):
    """``--wait-go 1`` (start_model): the real runner loads the model, says it is ready and waits; go() gives the
    same kind of result as run_model; cancel() leaves nothing behind."""
    _, mnn_path = converted["softmax"]
    inputs = _rng_inputs(CASES["softmax"][1])
    settings = mr.RunSettings(warmup=1, iterations=3, op_types=("Softmax",), timeout_s=60)
    started = mr.start_model(runner_bin, mnn_path, inputs, ["y"], scratch=work / "go", settings=settings)
    assert isinstance(started, mr.StartedRun)

    # blocked reading stdin (it may still be between printing the ready line and its read when start returns)
    assert wait_for_state(started.waiting.pid) == "S"
    assert not (work / "go" / "out" / "timing.json").exists()
    res = started.go()
    assert res.ok and res.stamp_error == "", res.error or res.stamp_error
    assert len(res.op_ms) == 3 and res.op_types.get("Softmax") == 1
    assert mr.READY_LINE not in res.proc.stdout
    ref = _reference(converted["softmax"][0], inputs, ["y"])
    assert compare(res.outputs["y"], ref["y"]).ok
    other = mr.start_model(runner_bin, mnn_path, inputs, ["y"], scratch=work / "go_cancel", settings=settings)
    assert isinstance(other, mr.StartedRun)
    other.cancel()
    assert not Path(f"/proc/{other.waiting.pid}").exists()
    # a timing's native side: its times alone come back (sandboxed: nothing else is brought back to the host)
    bwrap = not sandbox_check.bwrap_works()
    sandboxed = replace(settings, policy=sandbox.Policy(bwrap, out_bytes=64 << 20), checked=1, iterations=4,
                        outputs=False)
    times = mr.start_model(runner_bin, mnn_path, inputs, ["y"], BUILD_DIR, scratch=work / "go_times",
                           settings=sandboxed)
    assert isinstance(times, mr.StartedRun), times.error
    res = times.go()
    assert res.ok and len(res.op_ms) == 4 and res.outputs == {} and res.output_sets == () and res.checked == ()
    if bwrap:
        assert sorted(p.name for p in (work / "go_times" / "out").iterdir()) == ["timing.json"]


def test_timing_mode_shows_raster_ops_of_geometry(runner_bin, converted, work):
    _, mnn_path = converted["concat"]
    inputs = _rng_inputs(CASES["concat"][1])
    res = mr.run_model(runner_bin, mnn_path, inputs, ["y"], settings=mr.RunSettings(iterations=3, op_types=("*",), timeout_s=60), scratch=work / "timing_raster")
    assert res.ok, res.error
    assert res.op_types.get("Raster", 0) >= 1
    assert all(0 < o <= t for o, t in zip(res.op_ms, res.total_ms))
    assert res.stamp_error == "", res.stamp_error  # every op of every forward stamped, as many as op_types counts


def test_same_runner_runs_against_other_libraries(runner_bin, converted, work):
    """RUNPATH lets LD_LIBRARY_PATH choose the libMNN.so: a copy gives the same result, a broken one fails."""
    _, mnn_path = converted["argmax"]
    inputs = _rng_inputs(CASES["argmax"][1])
    copy = work / "libcopy"
    (copy / "express").mkdir(parents=True, exist_ok=True)
    shutil.copy2(BUILD_DIR / "libMNN.so", copy / "libMNN.so")
    shutil.copy2(BUILD_DIR / "express" / "libMNN_Express.so", copy / "express" / "libMNN_Express.so")
    base = mr.run_model(runner_bin, mnn_path, inputs, ["y"], settings=mr.RunSettings(timeout_s=60), scratch=work / "lib_base")
    other = mr.run_model(runner_bin, mnn_path, inputs, ["y"], copy, settings=mr.RunSettings(timeout_s=60), scratch=work / "lib_copy")
    assert base.ok and other.ok, other.error
    np.testing.assert_array_equal(base.outputs["y"], other.outputs["y"])
    assert other.proc.returncode == 0

    broken = work / "libbroken"
    broken.mkdir(exist_ok=True)
    (broken / "libMNN.so").write_bytes(b"not an ELF file")
    bad = mr.run_model(runner_bin, mnn_path, inputs, ["y"], broken, settings=mr.RunSettings(timeout_s=60), scratch=work / "lib_broken")
    assert not bad.ok
    assert "libMNN.so" in bad.error


def test_run_errors_exit_3_with_a_message(runner_bin, converted, work):
    garbage = work / "garbage.mnn"
    garbage.write_bytes(b"\x00" * 64)
    inputs = _rng_inputs(CASES["softmax"][1])
    res = mr.run_model(runner_bin, garbage, inputs, ["y"], settings=mr.RunSettings(timeout_s=60), scratch=work / "err_garbage")
    assert not res.ok and res.proc.returncode == mr.EXIT_RUN_ERROR and res.signal is None
    assert "cannot load model" in res.error

    _, mnn_path = converted["softmax"]
    res = mr.run_model(runner_bin, mnn_path, inputs, ["no_such_output"], settings=mr.RunSettings(timeout_s=60), scratch=work / "err_out")
    assert not res.ok and res.proc.returncode == mr.EXIT_RUN_ERROR, res.proc.output

    _, mm_path = converted["matmul"]
    bad_shapes = {"a": np.ones((6, 10), np.float32), "b": np.ones((11, 7), np.float32)}
    res = mr.run_model(runner_bin, mm_path, bad_shapes, ["y"], settings=mr.RunSettings(timeout_s=60), scratch=work / "err_shape")
    assert not res.ok and res.proc.returncode == mr.EXIT_RUN_ERROR
    assert "forward failed" in res.error and "Shape Error" in res.error

    wrong = {"x": np.zeros((4, 33), dtype=np.int32)}
    res = mr.run_model(runner_bin, mnn_path, wrong, ["y"], settings=mr.RunSettings(timeout_s=60), scratch=work / "err_dtype")
    assert not res.ok and res.proc.returncode == mr.EXIT_RUN_ERROR
    assert "input 'x' is int32" in res.error

    # an input file shorter or longer than its manifest line says (read whole, at once): exit 3, named
    for name, data in (("short", b"\0" * (4 * 4 * 33 - 4)), ("long", b"\0" * (4 * 4 * 33 + 1))):
        in_dir, out_dir = work / f"err_{name}_in", work / f"err_{name}_out"
        in_dir.mkdir()
        out_dir.mkdir()
        (in_dir / "manifest.txt").write_text("x float32 2 4 33\n")
        (in_dir / "x.bin").write_bytes(data)
        done = subprocess.run([str(runner_bin), str(mnn_path), str(in_dir), str(out_dir), "--outputs", "y"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == mr.EXIT_RUN_ERROR
        assert f"x.bin: {len(data)} bytes, manifest says {4 * 4 * 33}" in done.stderr


def test_convert_reports_unsupported_ops_and_missing_output(work):
    model = _model(
        helper.make_node("BitwiseXor", ["a", "b"], ["y"]),
        [("a", TensorProto.INT32, [4]), ("b", TensorProto.INT32, [4])],
        [("y", TensorProto.INT32, [4])],
    )
    onnx_path = work / "xor.onnx"
    onnx.save(model, onnx_path)
    out = work / "xor.mnn"
    out.write_bytes(b"stale")  # must not count as a result
    res = mconvert.convert(BUILD_DIR / "MNNConvert", onnx_path, out, mconvert.ConvertOptions(timeout_s=120))
    assert not res.ok
    assert "ONNX::BitwiseXor" in res.unsupported_ops
    assert "not supported" in res.reason and "Not Support" in res.log
    assert not out.exists() or out.read_bytes() != b"stale"


def test_parse_unsupported():
    log = "[12:00:00] writeFb.cpp:218: These Op Not Support: ONNX::A | ONNX::B \nConverted Failed!\n"
    assert mconvert.parse_unsupported(log) == ("ONNX::A", "ONNX::B")
    assert mconvert.parse_unsupported("Converted Success!\n") == ()


@pytest.mark.parametrize(("threads", "precision"), [(2, "high"), (1, "normal"), (2, "low")])
def test_threads_and_precision_are_accepted(threads, precision, runner_bin, converted, work):
    onnx_path, mnn_path = converted["maxpool"]
    inputs = _rng_inputs(CASES["maxpool"][1], seed=3)
    res = mr.run_model(runner_bin, mnn_path, inputs, ["y"], settings=mr.RunSettings(threads=threads, precision=precision, iterations=1, timeout_s=60), scratch=work / f"prec_{threads}_{precision}")
    assert res.ok, res.error
    assert res.op_types.get("Pooling") == 1
    # max pooling selects values: exact in fp32; fp16 (low precision, where supported) rounds to ~1e-3
    atol = 0.0 if precision == "high" else 2e-2
    cmp = compare(res.outputs["y"], _reference(onnx_path, inputs, ["y"])["y"], atol=atol, rtol=0.0)
    assert cmp.ok, cmp.reason
    with pytest.raises(ValueError, match="precision"):
        mr.run_model(runner_bin, mnn_path, inputs, ["y"], settings=mr.RunSettings(precision="fp16"), scratch=work / "prec_bad")


def test_several_input_sets_in_one_process(runner_bin, converted, work):
    """Input sets in_dir/0, in_dir/1, ...: one forward each in verify mode; in timing mode the timed forwards
    alternate between them; every set's outputs match its own reference, and timing.json has phase_ms, which
    holds the timed forwards and lies within the kit's own wall time of the run."""
    onnx_path, mnn_path = converted["softmax"]
    sets = [_rng_inputs(CASES["softmax"][1], seed=s) for s in (1, 2, 3)]
    refs = [_reference(onnx_path, one, ["y"])["y"] for one in sets]
    res = mr.run_model(runner_bin, mnn_path, sets, ["y"], settings=mr.RunSettings(timeout_s=60), scratch=work / "sets")
    assert res.ok, res.error
    assert len(res.output_sets) == 3 and res.outputs is res.output_sets[0] and res.phase_ms is None
    assert all(compare(out["y"], ref).ok for out, ref in zip(res.output_sets, refs))
    assert not compare(res.output_sets[0]["y"], refs[1]).ok  # the sets differ: each output is its own set's

    timed = mr.run_model(runner_bin, mnn_path, sets[:2], ["y"], scratch=work / "sets_timed",
                         settings=mr.RunSettings(warmup=2, iterations=5, op_types=("Softmax",), timeout_s=60))
    assert timed.ok, timed.error
    assert len(timed.total_ms) == 5 and len(timed.output_sets) == 2
    assert all(compare(out["y"], ref).ok for out, ref in zip(timed.output_sets, refs))
    assert sum(timed.total_ms) <= timed.phase_ms <= timed.proc.wall_s * 1e3
    with pytest.raises(ValueError, match="fewer than"):
        mr.run_model(runner_bin, mnn_path, sets, ["y"], settings=mr.RunSettings(iterations=2), scratch=work / "few")


def _preload(work: Path, name: str, code: str) -> Path:
    """A shared library compiled from ``code``, to be loaded before all others (LD_PRELOAD): its symbols come
    first in every lookup of the runner, as a candidate's libMNN.so's come before libc's."""
    src, lib = work / f"{name}.cpp", work / f"lib{name}.so"
    src.write_text(code)
    res = subprocess.run(["g++", "-O1", "-shared", "-fPIC", "-pthread", str(src), "-o", str(lib), "-ldl"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return lib


def _env(**extra: str) -> dict[str, str]:
    from kit.host import proc

    return {**proc.base_env(), **extra}


def test_the_runner_clock_is_out_of_a_librarys_reach(runner_bin, converted, work):
    """A library defining clock_gettime, gettimeofday and syscall's clock_gettime ahead of libc's, with a clock
    that stands still: the runner's times still advance (its clock is the system call itself; a runner reading
    std::chrono's clock measured 0 ms for every op and forward here).  MNN itself calls gettimeofday, so the
    functions return a time rather than abort."""
    lib = _preload(work, "clockhook", """
#include <dlfcn.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <cstdarg>
#include <ctime>
extern "C" int clock_gettime(clockid_t, struct timespec* ts) __THROW { ts->tv_sec = 1; ts->tv_nsec = 0; return 0; }
extern "C" int gettimeofday(struct timeval* tv, void*) __THROW { tv->tv_sec = 1; tv->tv_usec = 0; return 0; }
extern "C" long syscall(long n, ...) __THROW {
    va_list ap;
    va_start(ap, n);
    long a[6];
    for (long& x : a) x = va_arg(ap, long);
    va_end(ap);
    if (n == SYS_clock_gettime) return clock_gettime(static_cast<clockid_t>(a[0]), reinterpret_cast<timespec*>(a[1]));
    auto real = reinterpret_cast<long (*)(long, ...)>(dlsym(RTLD_NEXT, "syscall"));
    return real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}
""")
    _, mnn_path = converted["softmax"]
    inputs = _rng_inputs(CASES["softmax"][1])
    res = mr.run_model(runner_bin, mnn_path, [inputs, inputs], ["y"],
                       settings=mr.RunSettings(warmup=1, iterations=4, op_types=("Softmax",), timeout_s=60,
                                               env=_env(LD_PRELOAD=str(lib))),
                       scratch=work / "clockhook")
    assert res.ok, res.error
    assert all(t > 0 for t in res.op_ms) and all(t > 0 for t in res.total_ms)
    assert res.phase_ms >= sum(res.total_ms)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_thread_beyond_mnns_own_stops_the_runner(threads, runner_bin, converted, work):
    """MNN's own threads (the main one and threads - 1 pool workers) are allowed; one more, started by a
    library when it is loaded, makes the runner exit with EXIT_THREADS_LEFT."""
    lib = _preload(work, "extrathread", """
#include <chrono>
#include <thread>
__attribute__((constructor)) static void start() {
    std::thread([] { std::this_thread::sleep_for(std::chrono::seconds(60)); }).detach();
}
""")
    _, mnn_path = converted["softmax"]
    inputs = _rng_inputs(CASES["softmax"][1])
    settings = mr.RunSettings(threads=threads, timeout_s=60)
    ok = mr.run_model(runner_bin, mnn_path, inputs, ["y"], settings=settings, scratch=work / f"thr{threads}")
    assert ok.ok, ok.error
    res = mr.run_model(runner_bin, mnn_path, inputs, ["y"], settings=replace(settings, env=_env(LD_PRELOAD=str(lib))),
                       scratch=work / f"thr{threads}_extra")
    assert not res.ok and res.proc.returncode == mr.EXIT_THREADS_LEFT, res.proc.output
    assert f"{threads + 1} threads before the first forward" in res.error


def test_timed_forwards_run_on_fresh_inputs_and_the_checked_ones_are_right(runner_bin, work):
    """Timing mode: the first timed forward on each set runs on that set; the others on inputs derived from the
    sets (every tensor a sample without replacement of the sets' values: units of 64 elements for the 1 MB
    input and its last element alone, single elements for the small one); the runner writes --checked of them
    out with the pool indices it drew their inputs at, and their outputs are ONNX Runtime's for those inputs."""
    model = _model(helper.make_node("Add", ["a", "b"], ["y"]), [("a", F32, [255, 1023]), ("b", F32, [1023])],
                   [("y", F32, [255, 1023])])
    onnx_path = work / "fresh.onnx"
    onnx.save(model, onnx_path)
    conv = mconvert.convert(BUILD_DIR / "MNNConvert", onnx_path, work / "fresh.mnn", mconvert.ConvertOptions(timeout_s=120))
    assert conv.ok, conv.reason
    mnn_path = conv.model_path
    sets = [_rng_inputs([("a", "f", (255, 1023)), ("b", "f", (1023,))], seed=s) for s in (7, 8)]
    res = mr.run_model(runner_bin, mnn_path, sets, ["y"], scratch=work / "fresh_run",
                       settings=mr.RunSettings(warmup=2, iterations=8, op_types=("BinaryOp",), timeout_s=60, checked=3))
    assert res.ok, res.error
    assert len(res.checked) == 3 and all(3 <= c.forward <= 8 for c in res.checked)
    # the kit rebuilds each checked forward's inputs from its own sets at the pool indices the runner wrote (16
    # elements a unit, then the one element after a's last full unit; b's single elements, each index once): the
    # forward's outputs are ONNX Runtime's for exactly those inputs, which are neither set
    pools = mfresh.pools(sets)
    for c in res.checked:
        assert c.drawn and not (c.dir / "in").exists()
        draw, outs = c.read()
        ins, why = mfresh.rebuilt(draw, pools)
        assert why == [] and all(draw[name].dtype == np.int32 for name in ("a", "b"))
        assert not any(np.array_equal(ins[name], s[name]) for s in sets for name in ("a", "b"))
        ref = _reference(onnx_path, ins, ["y"])["y"]
        assert compare(outs["y"], ref).ok


def test_a_process_besides_the_runner_stops_it(runner_bin, converted, work):
    """A library that forks when it is loaded (the child waits forever): the runner sees its child before the
    first forward and exits with EXIT_PROCESS_LEFT."""
    lib = _preload(work, "forker", """
#include <unistd.h>
__attribute__((constructor)) static void start() {
    if (fork() == 0) for (;;) pause();
}
""")
    _, mnn_path = converted["softmax"]
    inputs = _rng_inputs(CASES["softmax"][1])
    res = mr.run_model(runner_bin, mnn_path, inputs, ["y"],
                       settings=mr.RunSettings(timeout_s=60, env=_env(LD_PRELOAD=str(lib))), scratch=work / "forker")
    assert not res.ok and res.proc.returncode == mr.EXIT_PROCESS_LEFT, res.proc.output
    assert "before the first forward" in res.error and "started a process" in res.error
