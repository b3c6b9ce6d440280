"""kit.stages.screen: the static checks of a candidate's sources and of its built library's symbols.

Sources: every rejecting rule refuses a small kernel that does what no kernel does (naming file, line and rule);
the flagging rules flag; the sample candidates (real MNN and fixture engine) pass.  Symbols: real shared libraries
compiled here with g++ (a "native" one and candidates that define a libc function or import fork)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kit.results.outcomes import StageFailure
from kit.results.records import ErrorKind, Status
from kit.stages import screen

ROOT = Path(__file__).resolve().parents[1]

KERNEL = """#include "backend/cpu/CPUBackend.hpp"
#include <vector>
namespace MNN {
ErrorCode CPUArgMax::onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) {
    %s
    return NO_ERROR;
}
}
"""

REJECTED = {
    "process": 'system("id");',
    "process (fork)": "if (fork() == 0) { for (;;) {} }",
    "network": "int s = socket(2, 1, 0); connect(s, nullptr, 0);",
    "dlopen": 'void* h = dlopen("libMNN.so", 2);',
    "file_io (fopen)": 'FILE* f = fopen("x", "w");',
    "file_io (fstream)": 'std::ofstream out("cache.bin");',
    "host_paths": 'const char* p = "/proc/self/maps";',
    "syscall": "syscall(39);",
    "signals": "signal(14, nullptr);",
    "affinity": "cpu_set_t a; CPU_ZERO(&a); for (int c = 0; c < 64; ++c) CPU_SET(c, &a); sched_setaffinity(0, sizeof a, &a);",
    "asm_syscall": 'long r; asm volatile("syscall" : "=a"(r) : "a"(39) : "rcx", "r11", "memory");',
    "descriptors (dup2)": "int p[2]; ::pipe(p); dup2(p[1], 2);",
    "descriptors (dup)": "int saved = dup (2);",
}


@pytest.mark.parametrize("case", sorted(REJECTED))
def test_a_kernel_doing_what_no_kernel_does_is_rejected(case):
    with pytest.raises(StageFailure) as ei:
        screen.check_sources({"CPUArgMax.cpp": KERNEL % REJECTED[case]})
    f = ei.value
    assert f.status is Status.REJECTED_INPUT and f.kind is ErrorKind.FORBIDDEN
    assert f.message.startswith("CPUArgMax.cpp:5: "), f.message  # file and line of the hit


def test_words_that_only_look_like_descriptor_calls_pass():
    screen.check_sources({"CPUArgMax.cpp": KERNEL % "int pipeline(int); int dupe = pipeline(2); (void)dupe;"})


@pytest.mark.parametrize("include", ["/root/.cache/mkb/trees/src/source/backend/cpu/CPUArgMax.cpp",
                                     "../../../other.hpp", "backend/cpu/CPUSoftmax.cpp"])
def test_includes_outside_the_tree_or_of_implementation_files_are_rejected(include):
    text = f'#include "{include}"\n' + KERNEL % ""
    with pytest.raises(StageFailure, match="includes an? "):
        screen.check_sources({"CPUArgMax.cpp": text})


def test_a_relative_include_that_stays_in_the_tree_is_allowed():
    """MNN's own OnnxGemm.cpp includes ../merge/MergeHelpers.hpp; from where it stands that is still the tree."""
    text = '#include "../merge/MergeHelpers.hpp"\n' + KERNEL % ""
    place = {"OnnxGemm.cpp": "tools/converter/source/optimizer/onnxextra/OnnxGemm.cpp"}
    assert screen.check_sources({"OnnxGemm.cpp": text}, places=place) == []
    deep = '#include "../../../../../../x.hpp"\n' + KERNEL % ""
    with pytest.raises(StageFailure, match="leaves the tree"):
        screen.check_sources({"OnnxGemm.cpp": deep}, places=place)


@pytest.mark.parametrize("directive", ['#define Q "backend/cpu/CPUReduction.cpp"\n#include Q',
                                       '%:include "backend/cpu/CPUSoftmax.cpp"', '#inc\\\nlude "backend/cpu/CPUSoftmax.cpp"',
                                       "#include_next <vector>", '#import "x.hpp"'])
def test_inclusions_the_path_checks_cannot_read_are_rejected(directive):
    """A reviewer's probe included another kernel's .cpp through a macro; digraphs and spliced lines likewise."""
    with pytest.raises(StageFailure, match="computed #include|#include_next|#import|implementation file"):
        screen.check_sources({"CPUArgMax.cpp": directive + "\n" + KERNEL % ""})


def test_threads_and_native_routines_are_flagged_not_rejected():
    text = KERNEL % "std::thread t([] {}); t.detach(); MNNSoftmax(nullptr, nullptr, 4); MNNMine(1);"
    original = KERNEL % "MNNSoftmax(dst, src, size); MNNExp(dst, src, size);"
    flags = screen.check_sources({"CPUArgMax.cpp": text}, {"source/backend/cpu/CPUArgMax.cpp": original})
    by = {f.code: f.reason for f in flags}
    assert set(by) == {screen.THREADS, screen.NATIVE_ROUTINES}
    assert by[screen.NATIVE_ROUTINES].endswith(": MNNSoftmax")  # MNNMine is not the native kernel's


@pytest.mark.parametrize("spelling", ["using namespace std; thread t(work, 0, 8); t.join();",
                                      "std::vector<std::thread> pool; pool.emplace_back(work);",
                                      "auto f = async(std::launch::async, work); f.get();",
                                      "std :: jthread j{work};"])
def test_threads_are_flagged_however_they_are_spelled(spelling):
    """A reviewer's probe started a thread as `thread t(...)` under `using namespace std` and got no flag."""
    flags = screen.check_sources({"CPUArgMax.cpp": KERNEL % spelling})
    assert [f.code for f in flags] == [screen.THREADS], spelling


def test_words_near_thread_are_not_threads():
    text = KERNEL % "int threadNum = 4; std::this_thread::yield(); thread_local int x = 0; // a thread per row"
    assert screen.check_sources({"CPUArgMax.cpp": text}) == []


def test_the_sample_candidates_pass():
    for root in (ROOT / "candidates" / "sample", ROOT / "tests" / "fixture_engine" / "candidates" / "sample"):
        for sample in sorted(p for p in root.glob("*/*") if p.is_dir()):
            files = {f.name: f.read_text(errors="replace") for f in sample.iterdir() if f.is_file()}
            assert screen.check_sources(files) == [], sample


def test_ignored_response_parts_become_flags():
    flags = screen.response_flags(["block at line 3 ignored: language 'python' is not C/C++"])
    assert [(f.code, f.reason) for f in flags] == [(screen.IGNORED_RESPONSE, "block at line 3 ignored: "
                                                    "language 'python' is not C/C++")]


# ---------------------------------------------------------------------------------------------- symbols
NEEDS_GXX = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def _so(tmp: Path, name: str, code: str) -> Path:
    src = tmp / f"{name}.cpp"
    src.write_text(code)
    out = tmp / f"{name}.so"
    subprocess.run(["g++", "-shared", "-fPIC", "-O0", str(src), "-o", str(out)], check=True, capture_output=True)
    return out


NATIVE = 'extern "C" int mnn_kernel(int x) { return x + 1; }\n'


@NEEDS_GXX
def test_a_library_defining_a_libc_function_or_calling_fork_is_rejected(tmp_path):
    native = screen.read_symbols(_so(tmp_path, "native", NATIVE))
    same = _so(tmp_path, "same", NATIVE + 'extern "C" int mnn_other(int x) { return x * 2; }\n')
    screen.check_library(same, native)  # a new kernel symbol is fine
    clock = _so(tmp_path, "clock", NATIVE + '#include <time.h>\nextern "C" int clock_gettime(clockid_t, '
                'struct timespec* t) { t->tv_sec = 0; t->tv_nsec = 1; return 0; }\n')
    with pytest.raises(StageFailure, match=r"defines libc functions \['clock_gettime'\]") as ei:
        screen.check_library(clock, native)
    assert ei.value.status is Status.REJECTED_INPUT and ei.value.kind is ErrorKind.FORBIDDEN
    forks = _so(tmp_path, "forks", NATIVE + '#include <unistd.h>\nextern "C" int spawn() { return fork(); }\n')
    with pytest.raises(StageFailure, match=r"calls \['fork'\], which no kernel needs"):
        screen.check_library(forks, native)
    # what the native library itself imports is not the candidate's doing
    screen.check_library(forks, screen.read_symbols(forks))


@pytest.mark.mnn
def test_every_file_a_task_lets_a_candidate_replace_passes_as_the_tree_has_it():
    """An honest candidate that keeps the tree's own text is never refused (67 files of MNN 3.2.2)."""
    import os

    from kit.suite.tasks import load_suite

    src = os.environ.get("MKB_MNN__SOURCE_DIR")
    if not src:
        pytest.skip("needs a real MNN 3.2.2 tree: set MKB_MNN__SOURCE_DIR")
    files = sorted({f for t in load_suite(ROOT / "tasks") for f in t.mnn.files})
    for rel in files:
        path = Path(src) / rel
        if path.is_file():
            assert all(f.code != screen.THREADS for f in screen.check_sources(
                {path.name: path.read_text(errors="replace")}, places={path.name: rel})), rel
