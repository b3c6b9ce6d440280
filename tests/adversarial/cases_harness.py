"""Candidates that go for the kit's own file and output handling (issue 26, "a harness no output can break"):
a tree 2000 levels deep in the runner's output directory, 3 GB written through several files there, and 1 GiB
printed on stdout or stderr.  Before the fix the first made ``shutil.rmtree`` raise RecursionError (the worker
died with no record, and every later check on the tree left in scratch), the second was ``ok`` with 3 GB on the
host disk, the third took the kit's process to 2.3 GB (it kept all a command printed, then copied it).

The tree and the files are written when the runner loads the candidate's library (a constructor: before the
runner's seccomp filter, which refuses creating files by path afterwards), through system calls spelled as bytes
(``RAW_SYSCALL``: x86-64 numbers), into the output directory the runner gets as its argv[3]; the prints once
per runner process, in its first forward.
"""

from __future__ import annotations

from corpus import Case, Expect
from snippets import RAW_SYSCALL

#: the runner's output directory, from its argv (argv[3]), kept by a constructor of the candidate's library
_OUT_DIR = RAW_SYSCALL + r"""#include <cstdio>
#include <cstring>
#include <string>
namespace {
char gHarnessOut[4096];
__attribute__((constructor)) void mkbHarnessOut(int argc, char** argv, char**) {
    if (argc > 3) for (size_t i = 0; i + 1 < sizeof gHarnessOut && argv[3][i] != 0; ++i) gHarnessOut[i] = argv[3][i];
}
const long kDirectory = 0200000, kWriteCreate = 01 | 0100;
}
"""

#: ``mkbDeepTree(levels)``: directories ``d/d/d/...`` ``levels`` deep under the output directory (mkdirat and
#: openat relative to the last one: no path is ever long)
DEEP_TREE = _OUT_DIR + r"""namespace {
void mkbDeepTree(int levels) {
    static const char d[] = {'d', 0};
    long fd = mkbRaw(2, (long)gHarnessOut, kDirectory, 0, 0);
    for (int i = 0; i < levels && fd >= 0; ++i) {
        mkbRaw(258, fd, (long)d, 0755, 0);
        long next = mkbRaw(257, fd, (long)d, kDirectory, 0);
        mkbRaw(3, fd, 0, 0, 0);
        fd = next;
    }
    if (fd >= 0) mkbRaw(3, fd, 0, 0, 0);
}
}
"""

#: ``mkbFill(total, per_file)``: ``total`` bytes written into files of ``per_file`` bytes each (under the per-file
#: limit) in the output directory, until a write fails
FILL = _OUT_DIR + r"""namespace {
void mkbFill(long total, long per_file) {
    static char buf[1 << 20];
    const std::string base(gHarnessOut);
    for (int k = 0; total > 0; ++k) {
        const std::string name = base + "/fill" + std::to_string(k);
        long fd = mkbRaw(2, (long)name.c_str(), kWriteCreate, 0644, 0);
        if (fd < 0) return;
        for (long w = 0; w < per_file && total > 0; w += (long)sizeof buf, total -= (long)sizeof buf) {
            if (mkbRaw(1, fd, (long)buf, (long)sizeof buf, 0) <= 0) {
                mkbRaw(3, fd, 0, 0, 0);
                return;
            }
        }
        mkbRaw(3, fd, 0, 0, 0);
    }
}
}
"""

#: ``mkbPrint(to, total)``: ``total`` bytes of text lines printed on ``to`` (stdio: the static checks allow it)
PRINT = r"""#include <cstdio>
#include <cstring>
namespace {
void mkbPrint(FILE* to, long total) {
    static char line[1 << 16];
    std::memset(line, 'x', sizeof line - 1);
    line[sizeof line - 1] = '\n';
    for (long done = 0; done < total; done += (long)sizeof line) std::fwrite(line, 1, sizeof line, to);
    std::fflush(to);
}
}
"""

_ONCE = "static bool mkbDone = false; if (!mkbDone) {{ mkbDone = true; {} }}"
#: ``code`` run by a constructor of the candidate's library, when the runner loads it: before the runner's seccomp
#: filter (kit/mnn/runner/mkb_lockdown.hpp), which refuses creating files by path once its start-up is done, so
#: these cases reach the kit's own handling of what lands in the output directory
_AT_LOAD = ("namespace {{ __attribute__((constructor(65535))) void mkbHarnessAct(int argc, char** argv, char** env) "
            "{{ mkbHarnessOut(argc, argv, env); {} }} }}")

HARNESS_CASES: tuple[Case, ...] = (
    Case("deep_tree_in_outputs", Expect("runtime_crash", "forbidden", reason="levels deep (the kit's cap on depth)"),
         top=DEEP_TREE + _AT_LOAD.format("mkbDeepTree(2000);"), klass="harness"),
    Case("writes_3gb_through_files", Expect("runtime_crash", "limit", reason="sandbox.out_mb"),
         top=FILL + _AT_LOAD.format("mkbFill(3L << 30, 32L << 20);"), klass="harness"),
    # a flood in a warm-up forward leaves the runner slower between its timed forwards (measured: the minimum gap
    # 0.124 -> 0.162 ms), which the CPU accounting can refuse (timing_failed, unaccounted_work: never correct,
    # never fast); either way one record with a named cause, and the kit's memory bounded
    Case("prints_1gib_on_stdout", Expect(("ok", "timing_failed")), top=PRINT,
         body=_ONCE.format("mkbPrint(stdout, 1L << 30);"), klass="harness"),
    Case("prints_1gib_on_stderr", Expect(("ok", "timing_failed")), top=PRINT,
         body=_ONCE.format("mkbPrint(stderr, 1L << 30);"), klass="harness"),
)
