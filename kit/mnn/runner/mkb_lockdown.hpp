// mkb_lockdown.hpp: what mkb_runner does once its start-up is done (model loaded, session and thread pool made,
// output folder opened), so that the candidate's code running in it afterwards can no longer make the system
// calls that bend a measurement: a seccomp filter, and a thread count that an honest join cannot race.
//
// Written for the MobileKernelBench kit; Linux only, no library but the C++ compiler's (no libseccomp).  The kit's
// runner (kit/mnn/runner/mkb_runner.cpp) and the fixture engine's (tests/fixture_engine/tools/runner/, a copy of
// this file that tests/test_lockdown.py keeps byte-identical) include it in one translation unit each.
//
// The filter (classic BPF, installed for every thread of the process by seccomp(SECCOMP_FILTER_FLAG_TSYNC)):
// * refused outright: rt_sigaction, sigaltstack, dup/dup2/dup3, fcntl F_DUPFD(_CLOEXEC), pipe/pipe2, socket,
//   socketpair, prctl, ptrace, process_vm_readv/writev, process_madvise, pidfd_open/getfd/send_signal, execve,
//   execveat, fork, vfork, tkill, pkey_mprotect, pkey_alloc, seccomp, userfaultfd, io_uring_* (its operations
//   would bypass the filter), unshare, setns, close_range, openat2 (its flags are behind a pointer), creat,
//   mknod(at), link(at), symlink(at), rename(at/at2), mkdir;
// * refused by argument: mprotect to PROT_NONE or with PROT_EXEC (a page the runner reads left unreadable and
//   computed in a fault handler; code made at run time), clone without CLONE_THREAD (a process), kill, tgkill,
//   rt_(tg)sigqueueinfo of another process, open/openat creating a file (O_CREAT, O_TMPFILE) or mkdirat other
//   than through the output folder's descriptor, close of that descriptor (the number could be reused for
//   another folder), mmap/mremap of more than the memory limit leaves (named as the limit, not as a crash);
// * clone3 fails with ENOSYS, so that glibc falls back to clone, whose flags the filter can read;
// * a call of another architecture (int 0x80, x32) is refused.
// A refused call raises SIGSYS (SECCOMP_RET_TRAP); the handler installed here, which nothing can replace once
// rt_sigaction is refused, writes one line naming the call on stderr and leaves with exit 9 (exit 10 for the
// memory limit).  Every other signal handler is reset to the default action first: a SIGSEGV handler the
// candidate installed from a static constructor, before the filter, would otherwise still run.

#pragma once

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <fcntl.h>
#include <initializer_list>

namespace mkb_lockdown {

//: exit statuses (kit/mnn/runner.py: EXIT_FORBIDDEN_CALL, EXIT_MEMORY_LIMIT)
constexpr int kExitForbiddenCall = 9;
constexpr int kExitMemoryLimit = 10;

// A system call by the instruction itself: libc's wrappers could be the candidate's (its library comes first in
// the runner's symbol lookups).
inline long sys(long n, long a = 0, long b = 0, long c = 0, long d = 0) {
#if defined(__x86_64__)
    long ret;
    register long r10 __asm__("r10") = d;
    __asm__ volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
    return ret;
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory", "cc");
    return x0;
#else
    return syscall(n, a, b, c, d);
#endif
}

// ---- the system calls, by architecture ----

#if defined(__x86_64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_X86_64;
// numbers of arch/x86/entry/syscalls/syscall_64.tbl (tests/test_lockdown.py checks them against the headers)
enum Nr : long {
    kMmap = 9, kMprotect = 10, kRtSigaction = 13, kMremap = 25, kClose = 3, kOpen = 2, kPipe = 22, kDup = 32,
    kDup2 = 33, kSocket = 41, kSocketpair = 53, kClone = 56, kFork = 57, kVfork = 58, kExecve = 59, kKill = 62,
    kFcntl = 72, kRename = 82, kMkdir = 83, kCreat = 85, kLink = 86, kSymlink = 88, kPtrace = 101,
    kRtSigqueueinfo = 129, kSigaltstack = 131, kMknod = 133, kPrctl = 157, kTkill = 200, kTgkill = 234,
    kOpenat = 257, kMkdirat = 258, kMknodat = 259, kRenameat = 264, kLinkat = 265, kSymlinkat = 266,
    kUnshare = 272, kDup3 = 292, kPipe2 = 293, kRtTgsigqueueinfo = 297, kSetns = 308, kProcessVmReadv = 310,
    kProcessVmWritev = 311, kRenameat2 = 316, kSeccomp = 317, kUserfaultfd = 323, kExecveat = 322,
    kPkeyMprotect = 329, kPkeyAlloc = 330,
};
#elif defined(__aarch64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
// numbers of include/uapi/asm-generic/unistd.h (aarch64 has no open, fork, pipe, dup2, mkdir... of its own;
// tests/test_lockdown.py checks them against the cross compiler's headers)
enum Nr : long {
    kMknodat = 33, kMkdirat = 34, kSymlinkat = 36, kLinkat = 37, kRenameat = 38, kDup = 23, kDup3 = 24,
    kFcntl = 25, kOpenat = 56, kClose = 57, kPipe2 = 59, kUnshare = 97, kPtrace = 117, kKill = 129, kTkill = 130,
    kTgkill = 131, kSigaltstack = 132, kRtSigaction = 134, kRtSigqueueinfo = 138, kPrctl = 167, kSocket = 198,
    kSocketpair = 199, kMremap = 216, kClone = 220, kExecve = 221, kMmap = 222, kMprotect = 226,
    kRtTgsigqueueinfo = 240, kSetns = 268, kProcessVmReadv = 270, kProcessVmWritev = 271, kRenameat2 = 276,
    kSeccomp = 277, kExecveat = 281, kUserfaultfd = 282, kPkeyMprotect = 288, kPkeyAlloc = 289,
};
#endif
// the same number on every architecture (added after the tables were unified)
enum NrCommon : long {
    kPidfdSendSignal = 424, kIoUringSetup = 425, kIoUringEnter = 426, kIoUringRegister = 427, kPidfdOpen = 434,
    kClone3 = 435, kCloseRange = 436, kOpenat2 = 437, kPidfdGetfd = 438, kProcessMadvise = 440,
};

// Why a call was refused: the SECCOMP_RET_TRAP data, which the handler gets as si_errno.
enum Reason : uint16_t {
    kRefused = 1, kProtection, kCreatesFile, kNewProcess, kSignalsOther, kMemoryLimit, kClosesOutput, kOtherArch,
    kMovesDescriptor,
};

struct Named {
    long nr;
    const char* name;
};

// Every call the filter refuses outright, by name (the handler names the call it stopped).
constexpr Named kRefusedCalls[] = {
#if defined(__x86_64__)
    {kOpen, "open"}, {kPipe, "pipe"}, {kDup2, "dup2"}, {kFork, "fork"}, {kVfork, "vfork"}, {kRename, "rename"},
    {kMkdir, "mkdir"}, {kCreat, "creat"}, {kLink, "link"}, {kSymlink, "symlink"}, {kMknod, "mknod"},
#endif
    {kRtSigaction, "rt_sigaction"}, {kSigaltstack, "sigaltstack"}, {kDup, "dup"}, {kDup3, "dup3"},
    {kPipe2, "pipe2"}, {kSocket, "socket"}, {kSocketpair, "socketpair"}, {kPrctl, "prctl"}, {kPtrace, "ptrace"},
    {kProcessVmReadv, "process_vm_readv"}, {kProcessVmWritev, "process_vm_writev"}, {kExecve, "execve"},
    {kExecveat, "execveat"}, {kTkill, "tkill"}, {kPkeyMprotect, "pkey_mprotect"}, {kPkeyAlloc, "pkey_alloc"},
    {kSeccomp, "seccomp"}, {kUserfaultfd, "userfaultfd"}, {kUnshare, "unshare"}, {kSetns, "setns"},
    {kMknodat, "mknodat"}, {kLinkat, "linkat"}, {kSymlinkat, "symlinkat"}, {kRenameat, "renameat"},
    {kRenameat2, "renameat2"}, {kPidfdSendSignal, "pidfd_send_signal"}, {kIoUringSetup, "io_uring_setup"},
    {kIoUringEnter, "io_uring_enter"}, {kIoUringRegister, "io_uring_register"}, {kPidfdOpen, "pidfd_open"},
    {kCloseRange, "close_range"}, {kOpenat2, "openat2"}, {kPidfdGetfd, "pidfd_getfd"},
    {kProcessMadvise, "process_madvise"},
};

// Calls refused by their arguments, by name.
constexpr Named kCheckedCalls[] = {
#if defined(__x86_64__)
    {kOpen, "open"},
#endif
    {kMmap, "mmap"}, {kMprotect, "mprotect"}, {kMremap, "mremap"}, {kClose, "close"}, {kClone, "clone"},
    {kKill, "kill"}, {kFcntl, "fcntl"}, {kRtSigqueueinfo, "rt_sigqueueinfo"}, {kTgkill, "tgkill"},
    {kOpenat, "openat"}, {kMkdirat, "mkdirat"}, {kRtTgsigqueueinfo, "rt_tgsigqueueinfo"},
};

inline const char* callName(long nr) {
    for (const auto& c : kRefusedCalls) {
        if (c.nr == nr) return c.name;
    }
    for (const auto& c : kCheckedCalls) {
        if (c.nr == nr) return c.name;
    }
    return "a system call";
}

// ---- the handler of a refused call ----

inline size_t appendText(char* buf, size_t at, size_t cap, const char* s) {
    while (*s != '\0' && at + 1 < cap) buf[at++] = *s++;
    return at;
}

inline size_t appendNumber(char* buf, size_t at, size_t cap, unsigned long v) {
    char digits[24];
    int n = 0;
    do digits[n++] = static_cast<char>('0' + v % 10); while ((v /= 10) != 0 && n < 24);
    while (n > 0 && at + 1 < cap) buf[at++] = digits[--n];
    return at;
}

inline unsigned long& memoryLimitMiB() {
    static unsigned long mib = 0;
    return mib;
}

inline const char* reasonText(int reason) {
    switch (reason) {
        case kProtection: return " making memory unreadable (PROT_NONE) or executable (PROT_EXEC)";
        case kCreatesFile: return " creating a file or folder outside the runner's output folder";
        case kNewProcess: return " creating a process (clone without CLONE_THREAD)";
        case kSignalsOther: return " signalling another process";
        case kClosesOutput: return " closing the runner's output folder";
        case kOtherArch: return " of another architecture (int 0x80, x32)";
        case kMovesDescriptor: return " duplicating a file descriptor (F_DUPFD)";
        default: return "";
    }
}

// SIGSYS from the filter: one line on stderr by the write system call, then exit_group (no library function:
// it may run on any thread, in the middle of anything).  Never returns.
inline void onRefusedCall(int, siginfo_t* info, void*) {
    char line[320];
    size_t n = 0;
    const long nr = info->si_syscall;
    const int reason = info->si_errno;
    int code = kExitForbiddenCall;
    if (reason == kMemoryLimit) {
        n = appendText(line, n, sizeof line, "mkb_runner: the memory limit: ");
        n = appendText(line, n, sizeof line, callName(nr));
        n = appendText(line, n, sizeof line, " of more than the address space left under the memory limit of ");
        n = appendNumber(line, n, sizeof line, memoryLimitMiB());
        n = appendText(line, n, sizeof line, " MiB (RLIMIT_AS), refused\n");
        code = kExitMemoryLimit;
    } else {
        n = appendText(line, n, sizeof line, "mkb_runner: forbidden system call ");
        n = appendText(line, n, sizeof line, callName(nr));
        n = appendText(line, n, sizeof line, " (");
        n = appendNumber(line, n, sizeof line, static_cast<unsigned long>(nr));
        n = appendText(line, n, sizeof line, ")");
        n = appendText(line, n, sizeof line, reasonText(reason));
        n = appendText(line, n, sizeof line, ": stopped by the runner's seccomp filter\n");
    }
    if (sys(SYS_write, 2, reinterpret_cast<long>(line), static_cast<long>(n)) != static_cast<long>(n)) {
        sys(SYS_write, 1, reinterpret_cast<long>(line), static_cast<long>(n));  // fd 2 closed by the candidate
    }
    for (;;) sys(SYS_exit_group, code);
}

// The kernel's struct sigaction (x86-64 and aarch64 alike): handler, flags, restorer, a 64-bit mask.
struct KernelSigaction {
    void (*handler)(int, siginfo_t*, void*);
    unsigned long flags;
    void (*restorer)();
    uint64_t mask;
};

// Never called: onRefusedCall does not return; x86-64 needs a restorer for every handler all the same.
inline void noReturn() {
    for (;;) sys(SYS_exit_group, kExitForbiddenCall);
}

// The SIGSYS handler installed, every other handler reset to the default action (signals 32 and 33 are glibc's
// own, for thread cancellation and set*id, and stay).  False if the kernel refused.
inline bool takeSignals() {
    constexpr unsigned long kSaSiginfo = 4, kSaRestorer = 0x04000000;
    for (long sig = 1; sig <= 64; ++sig) {
        if (sig == SIGKILL || sig == SIGSTOP || sig == SIGSYS || sig == 32 || sig == 33) continue;
        KernelSigaction old = {};
        if (sys(SYS_rt_sigaction, sig, 0, reinterpret_cast<long>(&old), 8) != 0) continue;
        const auto raw = reinterpret_cast<uintptr_t>(old.handler);
        if (raw == reinterpret_cast<uintptr_t>(SIG_DFL) || raw == reinterpret_cast<uintptr_t>(SIG_IGN)) continue;
        KernelSigaction dfl = {};
        sys(SYS_rt_sigaction, sig, reinterpret_cast<long>(&dfl), 0, 8);
    }
    KernelSigaction act = {};
    act.handler = onRefusedCall;
    act.flags = kSaSiginfo | kSaRestorer;
    act.restorer = noReturn;
    act.mask = ~uint64_t{0};  // nothing else runs on the thread while it writes its line
    if (sys(SYS_rt_sigaction, SIGSYS, reinterpret_cast<long>(&act), 0, 8) != 0) return false;
    uint64_t sigsys = uint64_t{1} << (SIGSYS - 1);
    sys(SYS_rt_sigprocmask, SIG_UNBLOCK, reinterpret_cast<long>(&sigsys), 0, 8);
    return true;
}

// ---- the filter ----

// What the filter needs to know of the process: its output folder's descriptor, its pid (signals to itself
// stay allowed: abort() raises SIGABRT), and the most one mapping may take (0: no limit).
struct Setup {
    int outFd = -1;
    long pid = 0;
    uint64_t maxMapBytes = 0;
};

// A classic BPF program built in a fixed array; every rule is self-contained (its own loads, its own returns),
// so every jump is short.
struct Program {
    static constexpr size_t kCap = 400;
    sock_filter code[kCap];
    size_t n = 0;
    bool overflow = false;

    void put(uint16_t op, uint32_t k, uint8_t jt = 0, uint8_t jf = 0) {
        if (n == kCap) {
            overflow = true;
            return;
        }
        code[n++] = sock_filter{op, jt, jf, k};
    }
    void load(uint32_t offset) { put(BPF_LD | BPF_W | BPF_ABS, offset); }
    void loadNr() { load(offsetof(seccomp_data, nr)); }
    // the low (or high) 32 bits of argument i (little-endian on both architectures)
    void loadArg(int i, bool high = false) { load(offsetof(seccomp_data, args) + 8 * i + (high ? 4 : 0)); }
    void trap(uint16_t reason) { put(BPF_RET | BPF_K, SECCOMP_RET_TRAP | reason); }
    void allow() { put(BPF_RET | BPF_K, SECCOMP_RET_ALLOW); }

    // a rule for call nr: `body` (which must end in returns) runs only for that call; A holds nr before it
    template <typename Body>
    void rule(long nr, Body body) {
        loadNr();
        const size_t jump = n;
        put(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 0);
        const size_t start = n;
        body();
        code[jump].jf = static_cast<uint8_t>(n - start);
        overflow = overflow || n - start > 255;
    }
    // refused unless argument `arg` (low 32 bits, an int) equals `value`
    void onlyIf(long nr, int arg, uint32_t value, uint16_t reason) {
        rule(nr, [&] {
            loadArg(arg);
            put(BPF_JMP | BPF_JEQ | BPF_K, value, 1, 0);
            trap(reason);
            allow();
        });
    }
    // refused if argument `arg` (all 64 bits) is above `limit`
    void notAbove(long nr, int arg, uint64_t limit, uint16_t reason) {
        rule(nr, [&] {
            loadArg(arg, true);
            put(BPF_JMP | BPF_JGT | BPF_K, static_cast<uint32_t>(limit >> 32), 4, 0);
            put(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(limit >> 32), 0, 2);
            loadArg(arg);
            put(BPF_JMP | BPF_JGT | BPF_K, static_cast<uint32_t>(limit), 1, 0);
            allow();
            trap(reason);
        });
    }
};

constexpr uint32_t kProtRead = 1, kProtWrite = 2, kProtExec = 4;
constexpr uint32_t kCloneThread = 0x00010000;
constexpr uint32_t kOCreat = 0100, kOTmpfile = 020000000;
constexpr uint32_t kFDupfd = 0, kFDupfdCloexec = 1030;

// Returns the filter for `s` in `p` (false: it did not fit, a bug).
inline bool buildFilter(const Setup& s, Program& p) {
    p.load(offsetof(seccomp_data, arch));
    p.put(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0);
    p.trap(kOtherArch);
    p.loadNr();
#if defined(__x86_64__)
    p.put(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u /* __X32_SYSCALL_BIT */, 0, 1);
    p.trap(kOtherArch);
#endif
    for (const auto& c : kRefusedCalls) {
        p.put(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(c.nr), 0, 1);
        p.trap(kRefused);
    }
    p.put(BPF_JMP | BPF_JEQ | BPF_K, kClone3, 0, 1);
    p.put(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
    p.rule(kMprotect, [&] {
        p.loadArg(2);
        p.put(BPF_JMP | BPF_JSET | BPF_K, kProtExec, 2, 0);
        p.put(BPF_JMP | BPF_JSET | BPF_K, kProtRead | kProtWrite, 0, 1);
        p.allow();
        p.trap(kProtection);
    });
    p.rule(kClone, [&] {
        p.loadArg(0);
        p.put(BPF_JMP | BPF_JSET | BPF_K, kCloneThread, 0, 1);
        p.allow();
        p.trap(kNewProcess);
    });
    for (long nr : {static_cast<long>(kKill), static_cast<long>(kTgkill), static_cast<long>(kRtSigqueueinfo),
                    static_cast<long>(kRtTgsigqueueinfo)}) {
        p.onlyIf(nr, 0, static_cast<uint32_t>(s.pid), kSignalsOther);
    }
    p.rule(kOpenat, [&] {
        p.loadArg(2);
        p.put(BPF_JMP | BPF_JSET | BPF_K, kOCreat | kOTmpfile, 1, 0);
        p.allow();
        p.loadArg(0);
        p.put(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(s.outFd), 1, 0);
        p.trap(kCreatesFile);
        p.allow();
    });
#if defined(__x86_64__)
    p.rule(kOpen, [&] {
        p.loadArg(1);
        p.put(BPF_JMP | BPF_JSET | BPF_K, kOCreat | kOTmpfile, 0, 1);
        p.trap(kCreatesFile);
        p.allow();
    });
#endif
    p.onlyIf(kMkdirat, 0, static_cast<uint32_t>(s.outFd), kCreatesFile);
    p.rule(kClose, [&] {
        p.loadArg(0);
        p.put(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(s.outFd), 0, 1);
        p.trap(kClosesOutput);
        p.allow();
    });
    p.rule(kFcntl, [&] {
        p.loadArg(1);
        p.put(BPF_JMP | BPF_JEQ | BPF_K, kFDupfd, 1, 0);
        p.put(BPF_JMP | BPF_JEQ | BPF_K, kFDupfdCloexec, 0, 1);
        p.trap(kMovesDescriptor);
        p.allow();
    });
    if (s.maxMapBytes > 0) {
        p.notAbove(kMmap, 1, s.maxMapBytes, kMemoryLimit);
        p.notAbove(kMremap, 2, s.maxMapBytes, kMemoryLimit);
    }
    p.allow();
    return !p.overflow;
}

// ---- installing it ----

// The number after `key` (a line of /proc/self/status, "VmSize:" say), or -1 if the file or the line is missing.
inline long statusValue(const char* key) {
    long fd = sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/proc/self/status"), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[4096];
    long n = 0;
    for (long got; n < static_cast<long>(sizeof buf) - 1; n += got) {
        got = sys(SYS_read, fd, reinterpret_cast<long>(buf + n), static_cast<long>(sizeof buf) - 1 - n);
        if (got <= 0) break;
    }
    sys(SYS_close, fd);
    buf[n < 0 ? 0 : n] = '\0';
    for (long i = 0; i < n; ++i) {
        if (buf[i] != '\n') continue;
        long k = 0;
        while (key[k] != '\0' && buf[i + 1 + k] == key[k]) ++k;
        if (key[k] != '\0') continue;
        long value = 0;
        for (long p = i + 1 + k; p < n && buf[p] != '\n'; ++p) {
            if (buf[p] >= '0' && buf[p] <= '9') value = value * 10 + (buf[p] - '0');
        }
        return value;
    }
    return -1;
}

// The largest single mapping the filter lets through: the address space left under RLIMIT_AS now, but never
// less than half the limit (glibc retries a refused arena of 64-128 MiB smaller, so a small mapping that the
// limit refuses is no crash and must stay a plain ENOMEM).  0: no limit.
inline uint64_t mapCap() {
    struct {
        uint64_t cur, max;
    } lim = {0, 0};
    if (sys(SYS_prlimit64, 0, 9 /* RLIMIT_AS */, 0, reinterpret_cast<long>(&lim)) != 0) return 0;
    if (lim.cur == ~uint64_t{0}) return 0;
    memoryLimitMiB() = static_cast<unsigned long>(lim.cur >> 20);
    const long kb = statusValue("VmSize:");
    const uint64_t used = kb > 0 ? static_cast<uint64_t>(kb) << 10 : 0;
    const uint64_t left = used < lim.cur ? lim.cur - used : 0;
    return left > lim.cur / 2 ? left : lim.cur / 2;
}

// Lock the process down (see the top of this file) with `outFd` the output folder's descriptor (O_DIRECTORY,
// kept open until the runner leaves).  Returns nullptr when the filter is in place for every thread, or why
// not: seccomp is missing where the runner runs (qemu-user emulates none; a kernel built without it), or a
// filter of the candidate's, installed from a static constructor before main, made the call fail or fake its
// success (the count of filters in /proc/self/status must grow by one).  The caller decides whether it may go on
// without (under an emulator) or must stop.
inline const char* lockDown(int outFd) {
#if !defined(__x86_64__) && !defined(__aarch64__)
    (void)outFd;
    return "no seccomp filter for this architecture (x86-64 and aarch64 only)";
#else
    Setup s;
    s.outFd = outFd;
    s.pid = sys(SYS_getpid);
    s.maxMapBytes = mapCap();
    static Program p;
    if (!buildFilter(s, p)) return "the seccomp filter does not fit its program (a bug of the runner)";
    // glibc installs its own handlers (SIGCANCEL, SIGSETXID) when the process makes its first thread: made
    // here, before rt_sigaction is refused, so that an honest kernel may start a thread of its own
    pthread_t first;
    if (pthread_create(&first, nullptr, [](void*) -> void* { return nullptr; }, nullptr) == 0) {
        pthread_join(first, nullptr);
    }
    if (!takeSignals()) return "rt_sigaction refused for SIGSYS";
    // qemu-user refuses PR_SET_NO_NEW_PRIVS (and PR_SET_SECCOMP) with EINVAL: a filter would apply to qemu itself,
    // which makes the calls the emulated program's need (measured: qemu-aarch64 7.2); a kernel never does
    const long np = sys(SYS_prctl, 38 /* PR_SET_NO_NEW_PRIVS */, 1, 0, 0);
    if (np == -EINVAL) {
        return "prctl(PR_SET_NO_NEW_PRIVS) refused with EINVAL (qemu-user refuses it and seccomp filters: they would "
               "apply to qemu itself)";
    }
    if (np != 0) return "prctl(PR_SET_NO_NEW_PRIVS) refused";
    sock_fprog prog = {static_cast<unsigned short>(p.n), p.code};
    const long before = statusValue("Seccomp_filters:");  // -1: a kernel older than 5.9 shows no count
    const long r = sys(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, reinterpret_cast<long>(&prog));
    if (r == -ENOSYS) return "the seccomp system call is missing here (qemu-user, or a kernel without it)";
    if (r == -EINVAL) return "seccomp filters are not supported here (qemu-user, or a kernel without them)";
    if (r > 0) return "a thread could not take the seccomp filter (TSYNC)";
    if (r != 0) return "seccomp(SECCOMP_SET_MODE_FILTER) refused";
    if (before >= 0 && statusValue("Seccomp_filters:") != before + 1) {
        return "the seccomp call returned success but no filter was added (Seccomp_filters did not grow)";
    }
    return nullptr;
#endif
}

// ---- threads: a settle point an honest join cannot race ----
//
// pthread_join returns once the kernel cleared the thread's tid (CLONE_CHILD_CLEARTID), early in its exit: the
// task stays in /proc/self/task, and in "Threads:" of /proc/self/status, until it is released a little later (an
// honest kernel that joined its helper was failed at random, "2 threads after forward 16").  Every exiting task
// has PF_EXITING in its flags (field 9 of /proc/self/task/<tid>/stat) from the start of do_exit, before the
// tid is cleared, and never runs user code again: such a task is not counted.  No waiting: a thread of the
// candidate's that is still running (not exiting) is counted at once.

constexpr unsigned long kPfExiting = 0x4;

// Whether a task whose /proc/<tid>/stat line is buf[0, n) is alive and not exiting.
inline bool statRuns(const char* buf, long n) {
    long close = -1;  // the comm field may hold spaces and parentheses: the fields start after its last ')'
    for (long i = 0; i < n; ++i) {
        if (buf[i] == ')') close = i;
    }
    if (close < 0) return true;
    long p = close + 1, field = 2;  // fields: 3 state, 4 ppid, ..., 9 flags
    char state = '?';
    unsigned long flags = 0;
    while (p < n && field < 9) {
        while (p < n && buf[p] == ' ') ++p;
        ++field;
        if (field == 3 && p < n) state = buf[p];
        if (field == 9) {
            while (p < n && buf[p] >= '0' && buf[p] <= '9') flags = flags * 10 + static_cast<unsigned long>(buf[p++] - '0');
        }
        while (p < n && buf[p] != ' ') ++p;
    }
    if (state == 'Z' || state == 'X' || state == 'x') return false;
    return (flags & kPfExiting) == 0;
}

// Whether the task `tid` (in /proc/self/task, opened as `taskDir`) is alive and not exiting; a task that is gone
// (its stat unreadable) is not.
inline bool taskRuns(long taskDir, const char* tid) {
    char path[48];
    size_t n = appendText(path, 0, sizeof path, tid);
    n = appendText(path, n, sizeof path, "/stat");
    path[n] = '\0';
    long fd = sys(SYS_openat, taskDir, reinterpret_cast<long>(path), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char buf[1024];
    long got = sys(SYS_read, fd, reinterpret_cast<long>(buf), static_cast<long>(sizeof buf) - 1);
    sys(SYS_close, fd);
    return got > 0 && statRuns(buf, got);
}

// The threads of this process that run or may run user code again (exiting ones left out), or -1 when
// /proc/self/task cannot be listed.
inline int liveThreads() {
    long dir = sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/proc/self/task"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) return -1;
    alignas(8) char buf[8192];
    int live = 0;
    for (long got; (got = sys(SYS_getdents64, dir, reinterpret_cast<long>(buf), sizeof buf)) > 0;) {
        for (long at = 0; at < got;) {
            // struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name
            unsigned short reclen;
            __builtin_memcpy(&reclen, buf + at + 16, 2);
            const char* name = buf + at + 19;
            if (name[0] >= '0' && name[0] <= '9' && taskRuns(dir, name)) ++live;
            at += reclen;
        }
    }
    sys(SYS_close, dir);
    return live;
}

}  // namespace mkb_lockdown
