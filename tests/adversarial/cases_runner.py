"""Adversarial cases against the runner once its start-up is done (issue 26): system calls no kernel needs, made
where the static checks do not see them (the instruction's bytes, a function pointer), an honest kernel that
joins a helper thread, and a memory hog.  Each passed unflagged (or was named wrongly) before the runner's
seccomp filter and thread settle point (kit/mnn/runner/mkb_lockdown.hpp): the fault handler, the unreadable
page, socketpair and pkey_mprotect were ``ok``; the joined thread was ``threads_left`` at random; the hog was
``runtime_crash`` "killed by signal 11".

System call numbers are x86-64's (the corpus runs on the host).  No text here names a call the static checks
look for (they read comments too)."""

from __future__ import annotations

from corpus import Case, Expect
from snippets import RAW_SYSCALL

#: ``mkbInstallFaultHandler()``: a handler for signal 11 (a fault) installed by system call 13 spelled as bytes,
#: with the restorer x86-64 needs (system call 15 as bytes): the first step of work deferred into a fault handler
FAULT_HANDLER = RAW_SYSCALL + r"""#include <cstdint>
namespace {
__attribute__((naked)) void mkbRestorer() { __asm__ volatile(".byte 0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0, 0x0f, 0x05"); }
void mkbOnFault(int, void*, void*) {}
bool mkbInstallFaultHandler() {
    struct { void (*h)(int, void*, void*); unsigned long flags; void (*r)(); uint64_t mask; } act =
        {mkbOnFault, 4 | 0x04000000, mkbRestorer, 0};
    return mkbRaw(13, 11, (long)&act, 0, 8) == 0;
}
}
"""

#: ``mkbHideOutput(p)``: the page of ``p`` made inaccessible (system call 10, protection 0) and accessible again:
#: what leaves an output unreadable until a fault handler computes it
HIDE_OUTPUT = RAW_SYSCALL + r"""#include <cstdint>
namespace {
void mkbHideOutput(const void* p) {
    const long page = (long)((uintptr_t)p & ~(uintptr_t)4095);
    mkbRaw(10, page, 4096, 0, 0);
    mkbRaw(10, page, 4096, 3, 0);
}
}
"""

#: calls outside the static checks' lists, through function pointers (no call expression names them)
POINTERS = r"""#include <cstdint>
#include <pthread.h>
extern "C" int socketpair(int, int, int, int*);
extern "C" int pkey_mprotect(void*, unsigned long, int, int);
namespace {
int (*volatile mkbPair)(int, int, int, int*) = &::socketpair;
int (*volatile mkbKeyed)(void*, unsigned long, int, int) = &::pkey_mprotect;
int (*volatile mkbStart)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*) = &::pthread_create;
alignas(4096) char gMkbPage[4096];
void* mkbHelper(void* arg) { *(volatile int*)arg += 1; return nullptr; }
}
"""

#: a helper thread started (through a pointer: no ``threads`` flag) and joined before onExecute goes on, on
#: every call: an honest kernel
JOIN_HELPER = ("{ static int work = 0; pthread_t t; if (mkbStart(&t, nullptr, mkbHelper, &work) == 0) "
               "pthread_join(t, nullptr); }")

RUNNER_CASES: tuple[Case, ...] = (
    Case("installs_a_fault_handler_by_hidden_syscall",
         Expect("runtime_crash", "forbidden", reason="forbidden system call rt_sigaction"), top=FAULT_HANDLER,
         body="static bool once = mkbInstallFaultHandler(); (void)once;", klass="runtime"),
    Case("makes_its_output_unreadable",
         Expect("runtime_crash", "forbidden", reason="forbidden system call mprotect"), top=HIDE_OUTPUT,
         body="mkbHideOutput(outputs[0]->host<int32_t>());", klass="runtime"),
    # the static checks may come to name these calls: refused there or by the filter, the call named either way
    Case("calls_socketpair_through_a_pointer",
         Expect(("runtime_crash", "rejected_input"), "forbidden", reason="socketpair"), top=POINTERS,
         body="{ int fds[2]; (void)mkbPair(1, 1, 0, fds); }", klass="runtime"),
    Case("calls_pkey_mprotect_through_a_pointer",
         Expect(("runtime_crash", "rejected_input"), "forbidden", reason="pkey_mprotect"), top=POINTERS,
         body="(void)mkbKeyed(gMkbPage, sizeof gMkbPage, 3, 0);", klass="runtime"),
    Case("joins_a_helper_thread", Expect("ok"), top=POINTERS, body=JOIN_HELPER, klass="runtime"),
    Case("hogs_12_gb", Expect("runtime_crash", "limit", reason="verify.memory_limit_mb"), top="#include <cstdlib>",
         body="{ static char* volatile hog; hog = (char*)std::malloc(12ull << 30); hog[1 << 20] = 1; }",
         klass="limits"),
)
