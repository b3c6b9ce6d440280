"""The adversarial corpus: hostile candidates of our own for the fixture engine's ArgMax task (``fx_argmax``),
each with the status, error kind, flags and reason the kit must give it.

A case is a change of the engine's own ``CPUArgMax.cpp`` (read from the engine tree at test time, so no kernel is
copied here): code at file scope after the includes (``top``), at the start of ``onExecute`` (``body``) and of
``onResize`` (``resize``), or whole files (``files``) for the bad-input cases.  Cases that try to leave something behind name it in
``leaves``: paths that must not exist after the run, and a marker that must not appear in any record.

Classes (issue 18): static rejections of the source, rejections of the built library's symbols, what only the
sandbox stops (obfuscated so that the static checks pass), resource limits, runtime cheats, bad inputs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from snippets import (
    ARGV,
    AT_EXIT,
    CONTENT_CACHE,
    CTOR_DOUBLE_FORK,
    FORGE_STAMPS,
    PLANT,
    RAW_SYSCALL,
    RESTART_CLOCKS,
    SCALE_TIMES,
    SEEN_VALUES,
    SIBLING_REWRITE,
    SYS_CLOSE,
    SYS_DUP2,
    SYS_EXIT_GROUP,
    SYS_FORK,
    SYS_PAUSE,
    SYS_PIPE,
    SYS_WAIT4,
)

TASK = "fx_argmax"
#: a string a case may try to smuggle out of the host (it must appear in no record)
HOST_SECRET = "mkb-adversarial-host-secret"
#: where cases try to leave files on the host
ESCAPE_DIR = Path("/tmp/mkb-adversarial-escape")


@dataclass(frozen=True)
class Expect:
    """What the kit must record: one of ``status`` (a status, or several acceptable ones), the error kind
    (None: any), flag codes it must carry, a substring of its error message or of a flag's reason."""

    status: str | tuple[str, ...]
    error_kind: str | None = None
    flags: tuple[str, ...] = ()
    reason: str = ""  # a substring of the record's error message (or a flag's reason)


@dataclass(frozen=True)
class Case:
    name: str
    expect: Expect
    top: str = ""
    body: str = ""
    resize: str = ""  # code at the start of ``onResize``
    files: dict[str, bytes] | None = None  # whole files instead of the kernel template
    drop: str = ""  # text removed from the kernel template
    leaves: tuple[str, ...] = ()  # host paths that must not exist after the run
    klass: str = ""
    #: an open hole (docs/untrusted.md, "Not caught"): why ``expect`` is what the kit records now, not what it should
    open: str = ""
    #: what the kit records with its own runner on a real MNN tree, where that differs from ``expect`` (the
    #: fixture engine's runner)
    real: Expect | None = None


def kernel(engine: Path, case: Case) -> dict[str, bytes]:
    """The files of ``case``: ``engine``'s CPUArgMax.cpp (the fixture engine's, or a real MNN tree's) with the
    case's code in, or the case's own files."""
    if case.files is not None:
        return case.files
    text = (engine / "source/backend/cpu/CPUArgMax.cpp").read_text()
    anchor = "namespace MNN {\n"
    assert anchor in text
    text = text.replace(anchor, case.top + "\n" + anchor, 1)
    # the engine's and MNN's own spell the signature differently ("Tensor*>&" / "Tensor *> &")
    head = re.search(r"ErrorCode CPUArgMax::onExecute\([^)]*\)\s*\{\n", text)
    assert head, "CPUArgMax::onExecute not found"
    text = text[:head.end()] + case.body + "\n" + text[head.end():]
    if case.resize:
        head = re.search(r"ErrorCode CPUArgMax::onResize\([^)]*\)\s*\{\n", text)
        assert head, "CPUArgMax::onResize not found"
        text = text[:head.end()] + case.resize + "\n" + text[head.end():]
    if case.drop:
        assert case.drop in text
        text = text.replace(case.drop, "")
    return {"CPUArgMax.cpp": text.encode()}


def _path_chars(path: str) -> str:
    """A C++ char array spelling ``path`` character by character (so no string literal names a host path)."""
    return "{" + ", ".join(f"'{c}'" for c in path) + ", 0}"


REJECT = "rejected_input"
#: a body that runs the kernel itself (a nested call of onExecute, which skips this code) between ``before`` (may
#: return early) and ``after``; ``out``/``n`` are the output and its size, ``memo`` a vector kept across calls
_AROUND = ("static std::vector<int32_t> memo; static bool inner = false; int32_t* out = outputs[0]->host<int32_t>(); "
           "size_t n = (size_t)outputs[0]->elementSize(); if (!inner) {{ {before} inner = true; "
           "ErrorCode e = onExecute(inputs, outputs); inner = false; {after} return e; }}")
#: as _AROUND, with the float input ``x`` and its size ``nx`` too
_AROUND_FLOAT = _AROUND.replace("if (!inner)", "const float* x = inputs[0]->host<float>(); "
                                "size_t nx = (size_t)inputs[0]->elementSize(); if (!inner)")
_ESC = str(ESCAPE_DIR)
#: ``mkbPlant(kind)`` called from a constructor of the library in the runner (its command line has --outputs),
#: before its main (the output folder made first: the runner has not made it yet)
_PLANT_EARLY = ("namespace {{ __attribute__((constructor)) void mkbPlantEarly(int argc, char** argv, char** env) {{ "
                "bool runner = false; for (int i = 1; i < argc; ++i) runner = runner || std::string(argv[i]) == "
                "\"--outputs\"; if (!runner) return; mkbOutArg(argc, argv, env); "
                "mkbRaw(83, (long)gOutDir, 0755, 0, 0); mkbPlant({kind}); }} }}\n")


#: the honest kernel beside the hostile ones: the task's best-of-k score must be its own
HONEST = Case("honest", Expect("ok"), klass="honest")

CASES: tuple[Case, ...] = (
    HONEST,
    # -- static checks of the source ---------------------------------------------------------------------
    Case("runs_a_shell", Expect(REJECT, "forbidden", reason="creates a process"), top="#include <cstdlib>",
         body='std::system("touch ' + _ESC + '/shell");', leaves=(_ESC + "/shell",), klass="static"),
    Case("forks", Expect(REJECT, "forbidden", reason="creates a process"), top="#include <unistd.h>",
         body="if (fork() == 0) { for (;;) {} }", klass="static"),
    Case("opens_a_socket", Expect(REJECT, "forbidden", reason="uses the network"), top="#include <sys/socket.h>",
         body="int s = socket(2, 1, 0); (void)s;", klass="static"),
    Case("loads_a_library", Expect(REJECT, "forbidden", reason="loads code at run time"), top="#include <dlfcn.h>",
         body='void* h = dlopen("libc.so.6", 2); (void)h;', klass="static"),
    Case("writes_a_file", Expect(REJECT, "forbidden", reason="reads or writes files"), top="#include <cstdio>",
         body='FILE* f = fopen("cache.bin", "wb"); if (f) fclose(f);', klass="static"),
    Case("reads_proc", Expect(REJECT, "forbidden", reason="names a host path"),
         body='const char* maps = "/proc/self/maps"; (void)maps;', klass="static"),
    Case("raw_syscall", Expect(REJECT, "forbidden", reason="makes raw system calls"), top="#include <unistd.h>",
         body="syscall(39);", klass="static"),
    Case("installs_a_signal_handler", Expect(REJECT, "forbidden", reason="installs or sends signals"),
         top="#include <csignal>", body="std::signal(SIGSEGV, SIG_IGN);", klass="static"),
    Case("includes_an_absolute_path", Expect(REJECT, "forbidden", reason="includes an absolute path"),
         top='#include "/dev/zero"', klass="static"),
    Case("includes_a_native_implementation", Expect(REJECT, "forbidden", reason="includes an implementation file"),
         top='#include "backend/cpu/CPUSoftmax.cpp"', klass="static"),
    Case("includes_outside_the_tree", Expect(REJECT, "forbidden", reason="a path that leaves the tree"),
         top='#include "../../../../kit/settings/config.py"', klass="static"),
    # -- the built library's symbols ---------------------------------------------------------------------------
    Case("patches_the_clock", Expect(REJECT, "forbidden", reason="defines libc functions ['clock_gettime']"),
         top='#include <ctime>\nextern "C" int clock_gettime(clockid_t, struct timespec* t) '
             "{ t->tv_sec = 0; t->tv_nsec = 0; return 0; }", klass="symbols"),
    Case("patches_memcpy", Expect(REJECT, "forbidden", reason="defines libc functions ['memcpy']"),
         top='#include <cstddef>\nextern "C" void* memcpy(void* d, const void* s, size_t n) '
             "{ char* a = (char*)d; const char* b = (const char*)s; while (n--) *a++ = *b++; return d; }",
         klass="symbols"),
    Case("forks_through_a_pointer", Expect(REJECT, "forbidden", reason="calls ['fork']"),
         top="#include <unistd.h>\nstatic pid_t (*volatile spawn)() = &::fork;", body="if (inputs.empty()) spawn();",
         klass="symbols"),
    # -- what only the sandbox stops (the static checks pass) ----------------------------------------------------
    # files created outside the runner's output folder: its seccomp filter refuses them (the sandbox's mounts
    # would hide them too)
    Case("escapes_to_the_host_tmp", Expect("runtime_crash", "forbidden", reason="forbidden system call openat"),
         top="#include <fstream>",
         body=f"{{ static const char p[] = {_path_chars(_ESC + '/written')}; std::basic_ofstream<char> o(p); "
              "o << 1; }", leaves=(_ESC + "/written",), klass="sandbox"),
    Case("plants_a_file_in_the_workspace",
         Expect("runtime_crash", "forbidden", reason="forbidden system call openat"), top="#include <fstream>",
         body="{ std::basic_ofstream<char> o(__FILE__ \".planted\"); o << 1; }", klass="sandbox"),
    Case("reads_a_host_file_into_its_error", Expect("ok"), top="#include <fstream>\n#include <iostream>",
         body=f"{{ static const char p[] = {_path_chars(_ESC + '/secret.txt')}; std::basic_ifstream<char> i(p); "
              "std::string s; if (std::getline(i, s)) { std::cerr << s; std::abort(); } }", klass="sandbox"),
    # from a static initializer, before the runner's seccomp filter (which refuses a new file in its folder)
    Case("writes_a_huge_file", Expect("runtime_crash", "limit", reason="file-size limit"),
         top="#include <fstream>\nnamespace { bool gBig = [] { std::basic_ofstream<char> o(\"big.bin\"); "
             "static char b[1 << 20] = {1}; for (int k = 0; k < 4096; ++k) o.write(b, sizeof b); o.flush(); "
             "return true; }(); }", klass="limits"),
    # -- resource limits -------------------------------------------------------------------------------------
    Case("spins_forever", Expect("runtime_timeout", "timeout"), body="for (volatile int k = 0; ; ) { (void)k; }",
         klass="limits"),
    Case("allocates_everything", Expect("runtime_crash", "limit", reason="memory limit"), top="#include <vector>",
         body="{ std::vector<char*> keep; for (;;) keep.push_back(new char[64 << 20]); }", klass="limits"),
    Case("compile_time_bomb", Expect("compile_error", "limit", reason="memory limit"),
         top="#define X1(a) a a a a a a a a\n#define X2(a) X1(X1(X1(a)))\n#define X3(a) X2(X2(a))\n"
             "long spin(long t) { X3(t += t * 3 + __LINE__;) return t; }", klass="limits"),
    # -- runtime cheats caught without the runner's checks ---------------------------------------------------
    Case("exits_early", Expect("runtime_crash", "exit_code"), top="#include <cstdlib>", body="std::exit(0);",
         klass="runtime"),
    Case("aborts", Expect("runtime_crash", "signal"), top="#include <cstdlib>", body="std::abort();", klass="runtime"),
    Case("floods_stderr", Expect("runtime_crash", "signal"), top="#include <cstdio>\n#include <cstdlib>",
         body="for (int k = 0; k < 200000; ++k) std::fputs(\"spam spam spam spam spam spam spam\\n\", stderr); "
              "std::abort();", klass="runtime"),
    Case("starts_a_thread", Expect("ok", flags=("threads",)), top="#include <thread>",
         body="static bool once = [] { std::thread([] {}).join(); return true; }(); (void)once;", klass="runtime"),
    # -- runtime cheats the runner's checks catch (several input sets per process, inputs compared after every
    # forward, outputs poisoned before it, threads counted, the timed outputs compared) --------------------------
    Case("caches_its_first_result", Expect("verify_mismatch", "value"), top="#include <algorithm>\n#include <vector>",
         body=_AROUND.format(before="if (memo.size() == n) { std::copy(memo.begin(), memo.end(), out); "
                                    "return NO_ERROR; }", after="memo.assign(out, out + n);"), klass="runtime"),
    Case("writes_its_input", Expect("verify_mismatch", "input_modified"), top="#include <vector>",
         body=_AROUND.format(before="", after="inputs[0]->host<float>()[0] = 1e30f; (void)memo;"), klass="runtime"),
    Case("correct_only_on_its_first_call", Expect("verify_mismatch"),
         body="static int calls = 0; if (++calls > 1) return NO_ERROR;", klass="runtime"),
    Case("correct_for_its_first_3_calls", Expect("verify_mismatch", "timed_output_mismatch"),
         body="static int calls = 0; if (++calls > 3) return NO_ERROR;", klass="runtime"),
    # the same, crashing instead of returning wrong outputs once verified (a process of verification makes 2
    # calls here, one of timing 6): a crash of the candidate's timing runs is not correct (it scored
    # timing_failed, which counts as correct)
    Case("traps_after_3_calls", Expect("runtime_crash", "signal", reason="candidate timing run"),
         body="static int calls = 0; if (++calls > 3) __builtin_trap();", klass="runtime"),
    # the timed forwards' outputs are compared with ONNX Runtime: the first on each input set, and some on fresh
    # inputs picked at random
    Case("skips_timed_forwards_but_the_last", Expect("verify_mismatch", "timed_output_mismatch",
                                                     reason="differ from ONNX Runtime"),
         top=ARGV, body="static int calls = 0; if (gIterations > 0 && ++calls <= gWarmup + gIterations - 2) "
                         "return NO_ERROR;", klass="runtime"),
    # the runner leaves by exit_group once its results are written: this destructor never runs (had it run, the
    # zeroed outputs would be a timed_output_mismatch)
    Case("rewrites_its_timing_at_exit", Expect("ok"), top=AT_EXIT, klass="runtime"),
    Case("leaves_a_thread_running", Expect("runtime_crash", "threads_left"), top="#include <chrono>\n#include <thread>",
         body="static bool once = [] { std::thread([] { for (;;) std::this_thread::sleep_for(std::chrono::seconds(1)); "
              "}).detach(); return true; }(); (void)once;", klass="runtime"),
    # a cache keyed on the input's content (8 sampled values): right on every forward, and fast on every repeated
    # input; the timed forwards' inputs are fresh, so it never hits there and has no speed to gain
    # (test_adversarial.py compares its time with the honest kernel's)
    Case("caches_on_sampled_input_values", Expect("ok"), top=CONTENT_CACHE,
         body=_AROUND_FLOAT.format(before="if (mkbCacheHit(x, nx, out, n)) return NO_ERROR;",
                                   after="mkbCacheStore(x, nx, out, n);"), klass="runtime"),
    # the same, adapted to inputs that are known values reordered: it replays on fresh inputs, wrongly, and the
    # timed forwards the runner checks at random are compared with ONNX Runtime (the message counts those: a set's
    # first forward is wrong too where the warm-ups' input held its 8 sampled values, and is then named first)
    Case("replays_for_seen_values", Expect("verify_mismatch", "timed_output_mismatch", reason="checked at random"),
         top=SEEN_VALUES, body=_AROUND_FLOAT.format(before="if (mkbSeenHit(x, nx, out, n)) return NO_ERROR;",
                                                     after="mkbSeenStore(x, nx, out, n);"), klass="runtime"),
    # processes started by system calls the static checks do not see (the instruction's bytes): a child, and a
    # child's child (reparented to the runner, the subreaper); each waits forever.  (A sibling made with
    # clone(CLONE_PARENT) scored ok here: the runner's /proc check did not see it; open, docs/untrusted.md)
    # in a forward the runner's seccomp filter refuses them (a process started before it, below, is counted)
    Case("forks_by_a_hidden_syscall", Expect("runtime_crash", "forbidden", reason="forbidden system call fork"),
         top=RAW_SYSCALL, body=f"static bool once = [] {{ if (mkbRaw({SYS_FORK}, 0, 0, 0, 0) == 0) "
                               f"for (;;) mkbRaw({SYS_PAUSE}, 0, 0, 0, 0); return true; }}(); (void)once;",
         klass="runtime"),
    Case("forks_twice_by_a_hidden_syscall",
         Expect("runtime_crash", "forbidden", reason="forbidden system call fork"),
         top=RAW_SYSCALL,
         body=f"static bool once = [] {{ long pid = mkbRaw({SYS_FORK}, 0, 0, 0, 0); if (pid == 0) {{ "
              f"if (mkbRaw({SYS_FORK}, 0, 0, 0, 0) == 0) for (;;) mkbRaw({SYS_PAUSE}, 0, 0, 0, 0); "
              f"mkbRaw({SYS_EXIT_GROUP}, 0, 0, 0, 0); }} int st = 0; mkbRaw({SYS_WAIT4}, pid, (long)&st, 0, 0); "
              "return true; }(); (void)once;", klass="runtime"),
    # processes that rewrite timing.json once the runner wrote it (every time / 5): a sibling (CLONE_PARENT: not
    # the runner's child, so not its to wait for) and a double fork from a static constructor (before the runner
    # becomes subreaper: the grandchild goes to the sandbox's init); the runner lists /proc in the sandbox's PID
    # namespace (--pid-ns 1).  Both scored ok (3.40x, 5.40x) while it looked only at /proc's NSpid line
    Case("sibling_rewrites_timing", Expect("runtime_crash", "forbidden", reason="forbidden system call clone"),
         top=SIBLING_REWRITE, body="static bool once = mkbSibling(); (void)once;", klass="runtime"),
    Case("ctor_double_fork_rewrites_timing", Expect("runtime_crash", "processes_left",
                                                    reason="besides the runner"),
         top=CTOR_DOUBLE_FORK, klass="runtime"),
    # files planted where the kit reads the runner's outputs: a link to /dev/zero (the kit followed it and read
    # ~8 GB: MemoryError, a harness_error retried on every resume) and a FIFO (a reader would block for ever)
    # (planted from a constructor: in a forward the runner's seccomp filter refuses mkdir, symlink and mknod)
    Case("outputs_via_dev_zero", Expect("runtime_crash", "forbidden", reason="a symbolic link"),
         top=PLANT + _PLANT_EARLY.format(kind=0), klass="runtime"),
    Case("outputs_via_a_fifo", Expect("runtime_crash", "forbidden", reason="a FIFO"),
         top=PLANT + _PLANT_EARLY.format(kind=1), klass="runtime"),
    # the runner's memory edited, no system call (the library runs in the runner's address space): every earlier
    # forward's times x0.25 at the start of each timed forward (it scored ok, 4.33x), and the op clock's start
    # (and the forward's t0) on the stack set to now; the runner streams each clock reading on stderr as it takes
    # it (kit/mnn/stamps.py), and timing.json disagrees with the stream: the candidate's runner's clock, not correct
    Case("scales_recorded_times", Expect("runtime_crash", "clock_mismatch", reason="of what was streamed"),
         top=SCALE_TIMES, body="static long calls = 0; ++calls; if (gIterations > 0 && calls - 1 - gWarmup >= 1) "
                               "mkbScaleTimes((size_t)(calls - 1 - gWarmup));", klass="runtime"),
    Case("restarts_the_op_clock", Expect("runtime_crash", "clock_mismatch", reason="of what was streamed"),
         top=RESTART_CLOCKS, body="if (gIterations > 0) mkbRestartClocks();", klass="runtime"),
    # the stream itself attacked: forged stamp lines on stderr (stdio: allowed), stderr closed, and a pipe of the
    # candidate's put on fd 2 (by system calls the static checks do not see; by dup2, rejected statically)
    Case("forges_stamp_lines", Expect("runtime_crash", "clock_mismatch", reason="stamp line"), top=FORGE_STAMPS,
         body="mkbForgeStamps();", klass="runtime"),
    Case("closes_stderr", Expect("runtime_crash", "forbidden"), top=ARGV + RAW_SYSCALL,
         body=f"if (gIterations > 0) mkbRaw({SYS_CLOSE}, 2, 0, 0, 0);", klass="runtime"),
    Case("hides_stamps_in_a_pipe", Expect("runtime_crash", "forbidden", reason="forbidden system call pipe"),
         top=ARGV + RAW_SYSCALL, body=f"static int fds[2] = {{-1, -1}}; if (gIterations > 0 && fds[0] < 0 && "
                                      f"mkbRaw({SYS_PIPE}, (long)fds, 0, 0, 0) == 0) mkbRaw({SYS_DUP2}, fds[1], 2, 0, 0);",
         klass="runtime"),
    Case("redirects_stderr", Expect("rejected_input", "forbidden", reason="redirects the process's file descriptors"),
         top="#include <unistd.h>", body="static int saved = dup(2); (void)saved;", klass="static"),
    Case("drops_its_registration", Expect("compile_error", "missing_symbol", reason="no longer registers"),
         drop="REGISTER_CPU_OP_CREATOR(CPUArgMaxCreator, OpType_ArgMax);", klass="runtime"),
    # -- bad inputs ------------------------------------------------------------------------------------------------
    Case("not_utf8", Expect(REJECT, "not_utf8"), files={"CPUArgMax.cpp": b"int x = 1; // \xff\xfe\n"}, klass="input"),
    Case("nul_bytes", Expect(REJECT), files={"CPUArgMax.cpp": b"int x = 1;\0\0\n"}, klass="input"),
    Case("oversized", Expect(REJECT, "file_too_large"), files={"CPUArgMax.cpp": b"// " + b"x" * (300 * 1024) + b"\n"},
         klass="input"),
    Case("not_allowed_name", Expect(REJECT, "allowlist"), files={"CPUSoftmax.cpp": b"int x;\n"}, klass="input"),
    Case("header_only", Expect(REJECT, "missing_file"), files={"CPUArgMax.hpp": b"#pragma once\n"}, klass="input"),
)

from cases_harness import HARNESS_CASES  # noqa: E402 - its cases are made of Case and Expect above
from cases_runner import RUNNER_CASES  # noqa: E402  (issue 26: the runner's lockdown)
from cases_scores import SCORE_CASES  # noqa: E402  (issue 26: what counts as correct; imports Case from here)

CASES = CASES + SCORE_CASES + HARNESS_CASES + RUNNER_CASES
