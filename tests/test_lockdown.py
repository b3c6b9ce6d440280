"""The runner's lockdown once its start-up is done (kit/mnn/runner/mkb_lockdown.hpp, in the kit's runner and the
fixture engine's): the seccomp filter stops each system call no kernel needs with exit 9 and the call named, an
allocation beyond the memory limit is exit 10 naming the limit, and the thread count has a settle point that
an honest join cannot race while a thread left running is still caught.  On the fixture engine, built for real,
with one probe kernel whose behaviour the environment variable MKB_PROBE picks (a test kernel, never screened);
and how the kit reads those exits."""

from __future__ import annotations

import platform
import shutil
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest_fixture import FIXTURE_ROOT, copy_fixture_engine
from crosstools import skip_without_cross_tools

from kit.host import proc
from kit.host.target import make_target
from kit.mnn import runner as mrunner
from kit.mnn import toolchain
from kit.mnn.runner_build import RUNNER_SOURCE
from kit.mnn.tensorio import to_wire, write_tensors
from kit.results.records import ErrorKind, Status
from kit.stages.runfailure import process_failure
from kit.suite.inputs import make_inputs
from kit.suite.tasks import load_suite

sys.path.insert(0, str(Path(__file__).parent / "adversarial"))
from corpus import Case, Expect, kernel  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja") and shutil.which("g++")),
                       reason="needs cmake, ninja and g++"),
    pytest.mark.skipif(platform.machine() != "x86_64", reason="the probes' system calls are x86-64's"),
]

#: the probe: what the first call of onExecute does, by MKB_PROBE (libc wrappers, or syscall() for calls glibc
#: has no wrapper of)
PROBE_TOP = r"""#include <cstdlib>
#include <cstring>
#include <string>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <cstddef>
namespace {
// MKB_PROBE=prefilter: a filter of the candidate's, from a constructor, that fakes the success of every later
// seccomp call (the runner's own then adds nothing)
__attribute__((constructor)) void mkbPreFilter() {
    const char* env = std::getenv("MKB_PROBE");
    if (env == nullptr || std::strcmp(env, "prefilter") != 0) return;
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_seccomp, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
    struct sock_fprog prog = {4, code};
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}
void* mkbHelper(void* arg) { *(volatile int*)arg += 1; return nullptr; }
void* mkbSpin(void*) { for (;;) pause(); return nullptr; }
alignas(4096) char gPage[4096];
void mkbProbe(void* out) {
    const char* env = std::getenv("MKB_PROBE");
    const std::string m = env ? env : "";
    int fds[2];
    static int work = 0;
    if (m == "join") { pthread_t t; if (pthread_create(&t, nullptr, mkbHelper, &work) == 0) pthread_join(t, nullptr); }
    static bool left = m == "leave" && [] { pthread_t t; return pthread_create(&t, nullptr, mkbSpin, nullptr) == 0; }();
    (void)left;
    if (m == "rt_sigaction") { struct sigaction sa; std::memset(&sa, 0, sizeof sa); sa.sa_handler = SIG_IGN; sigaction(SIGSEGV, &sa, nullptr); }
    long page = (long)out & ~4095L;
    if (m == "mprotect") { mprotect((void*)page, 4096, PROT_NONE); mprotect((void*)page, 4096, PROT_READ | PROT_WRITE); }
    if (m == "mprotect_exec") mprotect(gPage, 4096, PROT_READ | PROT_EXEC);
    if (m == "socketpair") socketpair(AF_UNIX, SOCK_STREAM, 0, fds);
    if (m == "socket") socket(AF_UNIX, SOCK_STREAM, 0);
    if (m == "pkey_mprotect") syscall(SYS_pkey_mprotect, gPage, 4096, PROT_READ | PROT_WRITE, 0);
    if (m == "dup") dup(2);
    if (m == "dup2") dup2(2, 100);
    if (m == "pipe2") pipe2(fds, 0);
    if (m == "fcntl") fcntl(2, F_DUPFD, 100);
    if (m == "prctl") prctl(PR_SET_NAME, "probe", 0, 0, 0);
    if (m == "sigaltstack") { stack_t st; std::memset(&st, 0, sizeof st); st.ss_sp = gPage; st.ss_size = 4096; sigaltstack(&st, nullptr); }
    if (m == "fork" && syscall(SYS_fork) == 0) _exit(0);
    if (m == "clone" && syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0) == 0) _exit(0);
    if (m == "execve") { char* argv[] = {nullptr}; execve("/bin/true", argv, argv); }
    if (m == "openat") open("probe-created.txt", O_CREAT | O_WRONLY, 0644);
    if (m == "kill") kill(1, 0);
    if (m == "ptrace") ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
    if (m == "io_uring_setup") syscall(425, 1, gPage);
    if (m == "hog") { static char* volatile hog; hog = (char*)std::malloc(12ull << 30); hog[1 << 20] = 1; }
}
}
"""
PROBE = Case("probe", Expect("ok"), top=PROBE_TOP, body="mkbProbe(outputs[0]->host<int32_t>());")

#: MKB_PROBE → the call the runner must name
REFUSED = {"rt_sigaction": "rt_sigaction", "mprotect": "mprotect", "mprotect_exec": "mprotect",
           "socketpair": "socketpair", "socket": "socket", "pkey_mprotect": "pkey_mprotect", "dup": "dup (",
           "dup2": "dup2", "pipe2": "pipe2", "fcntl": "fcntl", "prctl": "prctl", "sigaltstack": "sigaltstack",
           "fork": "fork", "clone": "clone", "execve": "execve", "openat": "openat", "kill": "kill",
           "ptrace": "ptrace", "io_uring_setup": "io_uring_setup"}
MEMORY_LIMIT_MB = 1024


@dataclass
class Probe:
    runner: Path
    model: Path
    inputs: Path
    work: Path

    def run(self, mode: str, *extra: str, limit_mb: int | None = MEMORY_LIMIT_MB) -> proc.ProcResult:
        out = self.work / f"out-{mode}"
        shutil.rmtree(out, ignore_errors=True)
        return proc.run([self.runner, self.model, self.inputs, out, "--outputs", "y", "--threads", "1", *extra],
                        cwd=self.work, env=proc.base_env({"MKB_PROBE": mode}), timeout_s=60,
                        memory_limit_bytes=None if limit_mb is None else limit_mb << 20)


def _ok(argv: list, cwd: Path, timeout_s: float = 600) -> None:
    res = proc.run(argv, cwd=cwd, timeout_s=timeout_s)
    assert res.ok, res.output


@pytest.fixture(scope="module")
def probe(tmp_path_factory) -> Probe:
    base = tmp_path_factory.mktemp("lockdown")
    src, build, work = copy_fixture_engine(base / "src"), base / "build", base / "work"
    build.mkdir()
    work.mkdir()
    (src / "source/backend/cpu/CPUArgMax.cpp").write_bytes(kernel(src, PROBE)["CPUArgMax.cpp"])
    _ok([sys.executable, "tools/script/register.py", "."], src)
    _ok(["cmake", "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", src], build)
    _ok(["ninja", "-j2"], build)
    task = next(t for t in load_suite(FIXTURE_ROOT / "tasks") if t.id == "fx_argmax")
    model = work / "argmax.fixmodel"
    _ok([build / "MNNConvert", "-f", "ONNX", "--modelFile", task.onnx_path, "--MNNModel", model, "--bizCode",
         "MNN", "--keepInputFormat=1"], work, 60)
    write_tensors(work / "in", {k: to_wire(k, v) for k, v in make_inputs(task, 0).items()})
    return Probe(build / "mkb_runner", model, work / "in", work)


def test_an_honest_kernel_is_unaffected(probe):
    for extra in ((), ("--warmup", "1", "--iterations", "4", "--checked", "2")):
        res = probe.run("none", *extra)
        assert res.ok and "no seccomp filter" not in res.stderr, res.output


def test_a_kernel_that_joins_a_helper_thread_is_ok_in_20_of_20_runs(probe):
    """Each run joins a thread in each of 21 forwards and is counted after each: 420 counts, none may fail."""
    results = [probe.run("join", "--warmup", "1", "--iterations", "20") for _ in range(20)]
    assert [r.returncode for r in results] == [0] * 20, next(r.output for r in results if not r.ok)


def test_a_thread_left_running_is_still_caught(probe):
    res = probe.run("leave")
    assert res.returncode == mrunner.EXIT_THREADS_LEFT and "2 threads after run 1" in res.stderr, res.output


@pytest.mark.parametrize("mode", sorted(REFUSED))
def test_each_call_no_kernel_needs_is_refused_and_named(probe, mode):
    res = probe.run(mode)
    assert res.returncode == mrunner.EXIT_FORBIDDEN_CALL, res.output
    assert f"forbidden system call {REFUSED[mode]}" in res.stderr and "seccomp filter" in res.stderr, res.output
    assert not (probe.work / "probe-created.txt").exists()


def test_a_filter_that_did_not_take_stops_the_run(probe):
    """A filter of the candidate's from a static constructor that fakes the success of the runner's seccomp call:
    the runner sees its filter did not take (Seccomp_filters did not grow) and stops (exit 9).  (Told it runs
    under an emulator, --extra-threads, it would say so and go on: qemu-user has no seccomp;
    tests/test_cross_fixture.py runs the sample set there.)"""
    res = probe.run("prefilter")
    assert res.returncode == mrunner.EXIT_FORBIDDEN_CALL, res.output
    assert "cannot install the runner's seccomp filter" in res.stderr and "did not grow" in res.stderr


def test_an_allocation_beyond_the_memory_limit_names_the_limit(probe):
    res = probe.run("hog")
    assert res.returncode == mrunner.EXIT_MEMORY_LIMIT, res.output
    assert f"memory limit of {MEMORY_LIMIT_MB} MiB" in res.stderr
    fail = process_failure(res, "runner")
    assert (fail.status, fail.kind) == (Status.RUNTIME_CRASH, ErrorKind.LIMIT)
    assert f"verify.memory_limit_mb = {MEMORY_LIMIT_MB}" in fail.message


def _result(returncode: int, stderr: str, sig: int | None = None) -> proc.ProcResult:
    return proc.ProcResult(("mkb_runner",), returncode, "", stderr, 0.1, signal=sig)


def test_the_kit_reads_a_refused_call_as_forbidden():
    line = "mkb_runner: forbidden system call pipe2 (293): stopped by the runner's seccomp filter"
    fail = process_failure(_result(mrunner.EXIT_FORBIDDEN_CALL, line), "runner")
    assert (fail.status, fail.kind) == (Status.RUNTIME_CRASH, ErrorKind.FORBIDDEN) and "pipe2" in fail.message
    fail = process_failure(_result(-signal.SIGSYS, "", signal.SIGSYS), "runner")
    assert (fail.status, fail.kind) == (Status.RUNTIME_CRASH, ErrorKind.FORBIDDEN) and "seccomp" in fail.message


#: a program of the header's thread count: crafted stat lines (a comm with spaces and parentheses; PF_EXITING in
#: the flags; a zombie), then this process's own live threads, alone and with a thread that sleeps
THREAD_COUNT = r"""#include "mkb_lockdown.hpp"
#include <cstdio>
#include <cstring>
static void* sleeper(void*) { for (;;) pause(); return nullptr; }
static bool runs(const char* line) { return mkb_lockdown::statRuns(line, (long)std::strlen(line)); }
int main() {
    std::printf("%d %d %d %d ", runs("12 (mkb_runner) S 1 12 12 0 -1 4194560 93 0 0"),
                runs("13 (a) b) (c) R 1 12 12 0 -1 4194564 0 0 0"), runs("14 (w) Z 1 12 12 0 -1 4194560 0"),
                runs("15 (w) R 1 12 12 0 -1 1077936192 0"));
    std::printf("%d ", mkb_lockdown::liveThreads());
    pthread_t t;
    pthread_create(&t, nullptr, sleeper, nullptr);
    std::printf("%d\n", mkb_lockdown::liveThreads());
    return 0;
}
"""


def test_the_thread_count_leaves_out_exiting_tasks_only(tmp_path):
    """pthread_join returns once the kernel cleared the thread's tid, while its task is still listed: a task
    whose flags hold PF_EXITING (0x4, set first in do_exit) or that is a zombie is not counted; a running or
    sleeping one is.  (The race itself did not show on this host's kernel, 0 of 16 000 joins; the rule is
    checked here on crafted stat lines and on this process's own threads.)"""
    (tmp_path / "count.cpp").write_text(THREAD_COUNT)
    _ok(["g++", "-std=c++17", "-O2", "-pthread", f"-I{RUNNER_SOURCE.parent}", "count.cpp", "-o", "count"], tmp_path, 120)
    res = proc.run([tmp_path / "count"], cwd=tmp_path, timeout_s=30)
    assert res.ok and res.stdout.split() == ["1", "0", "0", "1", "1", "2"], res.output


#: every number the filter names (mkb_lockdown.hpp's enums), by the name of its __NR_ macro
_NUMBERS = {"Mmap": "mmap", "Mprotect": "mprotect", "RtSigaction": "rt_sigaction", "Mremap": "mremap",
            "Close": "close", "Open": "open", "Pipe": "pipe", "Dup": "dup", "Dup2": "dup2", "Socket": "socket",
            "Socketpair": "socketpair", "Clone": "clone", "Fork": "fork", "Vfork": "vfork", "Execve": "execve",
            "Kill": "kill", "Fcntl": "fcntl", "Rename": "rename", "Mkdir": "mkdir", "Creat": "creat", "Link": "link",
            "Symlink": "symlink", "Ptrace": "ptrace", "RtSigqueueinfo": "rt_sigqueueinfo",
            "Sigaltstack": "sigaltstack", "Mknod": "mknod", "Prctl": "prctl", "Tkill": "tkill", "Tgkill": "tgkill",
            "Openat": "openat", "Mkdirat": "mkdirat", "Mknodat": "mknodat", "Renameat": "renameat",
            "Linkat": "linkat", "Symlinkat": "symlinkat", "Unshare": "unshare", "Dup3": "dup3", "Pipe2": "pipe2",
            "RtTgsigqueueinfo": "rt_tgsigqueueinfo", "Setns": "setns", "ProcessVmReadv": "process_vm_readv",
            "ProcessVmWritev": "process_vm_writev", "Renameat2": "renameat2", "Seccomp": "seccomp",
            "Userfaultfd": "userfaultfd", "Execveat": "execveat", "PkeyMprotect": "pkey_mprotect",
            "PkeyAlloc": "pkey_alloc", "PidfdSendSignal": "pidfd_send_signal", "IoUringSetup": "io_uring_setup",
            "IoUringEnter": "io_uring_enter", "IoUringRegister": "io_uring_register", "PidfdOpen": "pidfd_open",
            "Clone3": "clone3", "CloseRange": "close_range", "Openat2": "openat2", "PidfdGetfd": "pidfd_getfd",
            "ProcessMadvise": "process_madvise"}
#: calls aarch64 does not have (the header names them for x86-64 only)
_X86_ONLY = {"Open", "Pipe", "Dup2", "Fork", "Vfork", "Rename", "Mkdir", "Creat", "Link", "Symlink", "Mknod"}


@pytest.mark.parametrize("compiler", ["g++", "aarch64-linux-gnu-g++"])
def test_the_filters_call_numbers_are_the_system_headers(tmp_path, compiler):
    """The numbers are written per architecture in the header; each must be the one the (cross) compiler's own
    headers give, where they name the call: a wrong number would leave a call unfiltered."""
    if not shutil.which(compiler):
        pytest.skip(f"no {compiler}")
    checks = [f"#if defined(__NR_{nr}){' && defined(__x86_64__)' if k in _X86_ONLY else ''}\n"
              f"static_assert(mkb_lockdown::k{k} == __NR_{nr}, \"{nr}\");\n#endif" for k, nr in _NUMBERS.items()]
    (tmp_path / "numbers.cpp").write_text('#include "mkb_lockdown.hpp"\n' + "\n".join(checks) + "\n")
    _ok([compiler, "-std=c++17", "-fsyntax-only", f"-I{RUNNER_SOURCE.parent}", "numbers.cpp"], tmp_path, 120)


#: the header's lockdown, alone, in a program for the target: what it says where it runs
LOCKDOWN_ONLY = r"""#include "mkb_lockdown.hpp"
#include <cstdio>
#include <fcntl.h>
int main() {
    const char* why = mkb_lockdown::lockDown(open(".", O_RDONLY | O_DIRECTORY));
    std::printf("%s\n", why ? why : "in place");
}
"""


def test_under_qemu_user_the_filter_is_absent_and_says_why(tmp_path):
    """qemu-user refuses PR_SET_NO_NEW_PRIVS and seccomp filters (they would apply to qemu itself): the lockdown
    names that, and the runner told it runs under an emulator (--extra-threads) prints it as a note and goes on;
    emulated timings are never scored (tests/test_cross_fixture.py)."""
    skip_without_cross_tools()
    (tmp_path / "lock.cpp").write_text(LOCKDOWN_ONLY)
    _ok(["aarch64-linux-gnu-g++", "-std=c++17", "-O1", "-pthread", "-static", f"-I{RUNNER_SOURCE.parent}", "lock.cpp",
         "-o", "lock"], tmp_path, 300)
    res = proc.run([*toolchain.emulator(make_target("aarch64")), tmp_path / "lock"], cwd=tmp_path, timeout_s=60)
    assert res.ok and "qemu-user refuses it and seccomp filters" in res.stdout, res.output
