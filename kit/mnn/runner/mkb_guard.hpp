// mkb_guard.hpp: what mkb_runner (mkb_runner.cpp) does so that the candidate's library it loads cannot game the
// measurement: a clock, a thread count, byte compares and an exit that use no libc symbol.
//
// Written for the MobileKernelBench kit; standard library and Linux only (nothing of MNN).  Included by
// mkb_runner.cpp only (one translation unit).
//
// Why no libc symbol: the runner's undefined symbols are looked up in the executable, then in its libraries in
// load order, and libMNN.so (the candidate's build) comes before libc.  A clock_gettime, gettimeofday, syscall,
// memcmp or readdir defined in the candidate's library would therefore replace libc's for the whole runner
// (std::chrono's clocks call clock_gettime).  The system calls here are made by the instruction itself.

#pragma once

#include "mkb_lockdown.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <fcntl.h>
#include <signal.h>

#include <vector>

namespace mkb {

// A system call with up to four arguments, made by the instruction itself (mkb_lockdown.hpp's, which the
// fixture engine's runner includes alone).
inline long rawSyscall(long n, long a, long b, long c, long d = 0) { return mkb_lockdown::sys(n, a, b, c, d); }

// CLOCK_MONOTONIC in milliseconds, read by the system call (not the vDSO, not libc): ~0.26 us a read here
// against ~0.03 us through libc (measured on the 2-core x86-64 dev VM), the price of a clock nothing in the
// process can replace by defining a symbol.
inline double monotonicMs() {
    struct timespec ts = {0, 0};
    rawSyscall(SYS_clock_gettime, CLOCK_MONOTONIC, reinterpret_cast<long>(&ts), 0);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}


// ---- processes: none but the runner may exist once a forward returns ----
//
// The runner makes itself its descendants' subreaper (PR_SET_CHILD_SUBREAPER) before any forward: a process the
// candidate forks is its child, and so is one forked twice (the middle one exits, the last one is reparented to
// the nearest subreaper, the runner, not to init), so wait4 sees both.  A process made with CLONE_PARENT is the
// runner's sibling instead: inside the sandbox's PID namespace /proc lists it beside the sandbox's init and the
// runner (outside a PID namespace, every process of the host is listed and that check is left out).

// 1 if this process is now its descendants' subreaper, 0 if the kernel refused (the wait4 check still sees
// direct children).
inline bool becomeSubreaper() {
    return rawSyscall(SYS_prctl, 36 /* PR_SET_CHILD_SUBREAPER */, 1, 0, 0) == 0;
}

// The pid of a child of this process (alive, or exited and now reaped), or 0 if it has none.  __WALL: children
// of any kind, those made by clone without SIGCHLD too.
inline long childProcess() {
    int status = 0;
    long pid = rawSyscall(SYS_wait4, -1, reinterpret_cast<long>(&status), 1 /* WNOHANG */ | 0x40000000 /* __WALL */, 0);
    if (pid > 0) return pid;
    if (pid == 0) return -1;  // a child exists, still running (wait4 names none)
    return 0;                 // ECHILD: none
}

// The first number after "\n<key>" in the file at path (a /proc status file), or -1; with `count`, how many
// numbers follow the key on its line.
inline long statusNumber(const char* path, const char* key, int* count = nullptr) {
    long fd = rawSyscall(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char buf[4096];
    long n = 0;
    for (long got; n < static_cast<long>(sizeof buf) - 1; n += got) {
        got = rawSyscall(SYS_read, fd, reinterpret_cast<long>(buf + n), static_cast<long>(sizeof buf) - 1 - n);
        if (got <= 0) break;
    }
    rawSyscall(SYS_close, fd, 0, 0);
    buf[n < 0 ? 0 : n] = '\0';
    for (long i = 0; i < n; ++i) {
        if (buf[i] != '\n') continue;
        long k = 0;
        while (key[k] != '\0' && buf[i + 1 + k] == key[k]) ++k;
        if (key[k] != '\0') continue;
        long p = i + 1 + k, value = -1;
        int numbers = 0;
        while (buf[p] != '\n' && buf[p] != '\0') {
            while (buf[p] == ' ' || buf[p] == '\t') ++p;
            if (buf[p] < '0' || buf[p] > '9') break;
            long v = 0;
            while (buf[p] >= '0' && buf[p] <= '9') v = v * 10 + (buf[p++] - '0');
            if (numbers++ == 0) value = v;
        }
        if (count != nullptr) *count = numbers;
        return value;
    }
    return -1;
}

// The number of threads of this process (the "Threads:" line of /proc/self/status), or -1 if unreadable.
inline int countThreads() { return static_cast<int>(statusNumber("/proc/self/status", "Threads:")); }

// The processes the runner may see in /proc inside the sandbox's PID namespace: itself and the sandbox's init
// (pid 1, bubblewrap's, whose child the runner must be), when the kit says it runs in one (--pid-ns 1) or
// "NSpid:" lists more than one pid; empty (nothing listed) in the host's PID namespace, where every process of
// the host is in /proc.  The kit has to say so: bubblewrap mounts the namespace's own /proc, whose NSpid line
// shows that namespace's pid alone, so the runner cannot tell from it (a sibling made with CLONE_PARENT and a
// double fork from a static constructor rewrote timing.json unseen while it looked only at NSpid).
// Why not bubblewrap's --as-pid-1 (the runner as the namespace's init: every orphan its child, no sibling
// possible), measured with bwrap 0.8: the kernel drops signals of default action that an init sends itself or
// gets from the kernel, so abort() died of SIGSEGV instead of SIGABRT, the file-size limit's SIGXFSZ was
// ignored (write failed, exit 0) and the CPU limit's SIGXCPU too (killed at the hard limit instead).
struct ProcessView {
    std::vector<long> allowed;
    long self = 0, parent = 0;  // parent: the runner's, which must be the sandbox's init (1) in a namespace

    void init(bool toldPidNamespace) {
        int levels = 0;
        statusNumber("/proc/self/status", "NSpid:", &levels);
        if (!toldPidNamespace && levels < 2) return;  // the host's PID namespace: not listed
        self = rawSyscall(SYS_getpid, 0, 0, 0);
        parent = rawSyscall(SYS_getppid, 0, 0, 0);
        allowed.push_back(self);
        allowed.push_back(1);
    }

    // What stands between the runner and the sandbox's init: a process of the candidate's that forked the
    // runner from a static constructor and outlives it above it (0: none; the runner is init's child).
    long wrongParent() const { return !allowed.empty() && parent != 1 ? parent : 0; }

    // The pid of a process in /proc that is not allowed, or 0 (also when there is no namespace to look in);
    // -1 when /proc cannot be listed (a candidate that used up the open files, say): never taken for "none".
    long stranger() const {
        if (allowed.empty()) return 0;
        long fd = rawSyscall(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/proc"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) return -1;
        alignas(8) char buf[8192];
        long found = 0;
        for (long got; found == 0 && (got = rawSyscall(SYS_getdents64, fd, reinterpret_cast<long>(buf), sizeof buf)) > 0;) {
            for (long at = 0; at < got;) {
                // struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name
                unsigned short reclen;
                __builtin_memcpy(&reclen, buf + at + 16, 2);
                const char* name = buf + at + 19;
                long pid = 0;
                bool digits = name[0] != '\0';
                for (const char* c = name; *c != '\0'; ++c) {
                    digits = digits && *c >= '0' && *c <= '9';
                    pid = pid * 10 + (*c - '0');
                }
                bool known = !digits;
                for (long a : allowed) known = known || a == pid;
                if (!known) found = pid;
                at += reclen;
            }
        }
        rawSyscall(SYS_close, fd, 0, 0);
        return found;
    }
};

// Whether a and b hold the same n bytes: an OR of XORs over 16-byte vectors (GCC's vector extension: SSE2 or
// NEON; the fixed-size __builtin_memcpy is a plain load), which the compiler never turns into a call to memcmp,
// a symbol a library could replace.  0.12 ms for 4 MB in the runner here, 0.29 ms 8 bytes at a time, ~3 ms a
// byte at a time.
inline bool sameBytes(const void* a, const void* b, size_t n) {
    typedef uint64_t Lanes __attribute__((vector_size(16)));
    const unsigned char* x = static_cast<const unsigned char*>(a);
    const unsigned char* y = static_cast<const unsigned char*>(b);
    Lanes diff = {0, 0};
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        for (size_t k = 0; k < 64; k += 16) {
            Lanes u, v;
            __builtin_memcpy(&u, x + i + k, 16);
            __builtin_memcpy(&v, y + i + k, 16);
            diff |= u ^ v;
        }
    }
    uint64_t rest = diff[0] | diff[1];
    for (; i < n; ++i) rest |= static_cast<uint64_t>(x[i] ^ y[i]);
    return rest == 0;
}

// End the process now with `code`, by the exit_group system call itself: no static object's destructor, no
// atexit/at_quick_exit handler, no thread_local destructor and no ELF fini function runs (exit() and a return
// from main run all of those, and the candidate's library can register any of them: a destructor that rewrote
// timing.json after the runner wrote it made a 5.4x speedup out of nothing), and no libc function is called
// that the candidate's library could replace (_exit is one).  The caller flushes and closes what it wrote
// first: stdio buffers are not flushed here.
[[noreturn]] inline void leaveNow(int code) {
    for (;;) rawSyscall(SYS_exit_group, code, 0, 0);
}

// Block every signal of the calling thread (what can be blocked: not SIGKILL/SIGSTOP), by the system call:
// a handler the candidate installed (a timer's SIGALRM, say) cannot run on the main thread between the runner
// writing its results and leaving.
inline void blockSignals() {
    uint64_t all = ~uint64_t{0};
    rawSyscall(SYS_rt_sigprocmask, SIG_BLOCK, reinterpret_cast<long>(&all), 0, sizeof all);
}

// Fill n bytes at p with 0xFF (float32: NaN; int32: -1).  The empty asm per 64 bytes keeps the compiler from
// turning the loop into a call to memset, which a library could replace.
inline void poisonBytes(void* p, size_t n) {
    unsigned char* b = static_cast<unsigned char*>(p);
    size_t i = 0;
    for (; i < n && reinterpret_cast<uintptr_t>(b + i) % 8 != 0; ++i) {
        b[i] = 0xFF;
        __asm__ volatile("" : : "r"(b + i) : "memory");
    }
    for (; i + 64 <= n; i += 64) {
        uint64_t* w = reinterpret_cast<uint64_t*>(b + i);
        for (int k = 0; k < 8; ++k) w[k] = ~uint64_t{0};
        __asm__ volatile("" : : "r"(b + i) : "memory");
    }
    for (; i < n; ++i) {
        b[i] = 0xFF;
        __asm__ volatile("" : : "r"(b + i) : "memory");
    }
}

}  // namespace mkb
