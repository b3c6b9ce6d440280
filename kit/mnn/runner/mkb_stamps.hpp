// mkb_stamps.hpp: the runner's stream of clock stamps on stderr (the kit reads it: kit/mnn/stamps.py).
//
// Written for the MobileKernelBench kit; standard library and Linux only.  Included by mkb_runner.cpp only.
//
// Why: the candidate's library runs in the runner's address space, so anything the runner keeps in memory
// while candidate code runs can be edited (a candidate that scaled the runner's arrays of times by 0.25 scored
// 4.33x).  Every clock reading a sample is made of is therefore written to stderr, by the write system call
// made by the instruction itself, before any candidate code runs again; in the pipe it is out of reach.  The
// kit rebuilds the samples from the stream and refuses a timing.json that disagrees with it.
//
// Lines (<ns>: CLOCK_MONOTONIC in integer nanoseconds, lower-case hex; <i>: the timed forward, 1-based):
//   "@mkbt F <i> <ns> <cpu>" forward begins, "@mkbt b <ns> <Type>" an op of MNN op type <Type> begins (every op, the
//   kit selects), "@mkbt e <ns>" it ends, "@mkbt E <i> <ns> <cpu>" forward ends (<cpu>: the
//   CPU time of the thread that writes it, the main one: CLOCK_THREAD_CPUTIME_ID, hex nanoseconds).
// A line is one write(2) of at most 96 bytes: a pipe takes it whole (PIPE_BUF), never interleaved with another
// writer's.  A write that fails or is short (the candidate closed fd 2, or made it non-blocking and let the pipe
// fill) ends the runner with kExitStampLost; so does a fd 2 that is no longer the file it was at the start
// (checked after every op's end stamp and every forward's stamps: a pipe of the candidate's dup2'ed there to
// relay edited stamps would get the stamps written in between, and no candidate code runs between a write and
// its check).
//
// Cost, measured side by side (docs/untrusted.md has every figure): median op time per forward before -> with the
// stream, MNN 3.2.2 on the loaded 2-core x86-64 dev VM, 12 runs of 10 + 30 forwards: softmax_last_2d 0.576 ->
// 0.579 ms, matmul_2d_rect 1.072 -> 1.071, conv2d_1x7 0.197 -> 0.195, hard_sigmoid_4d ("*": 3 ops) 0.874 -> 0.941;
// whole forwards +0-11 %.  A begin stamp's write lands inside the interval it opens, on both sides alike.  Only
// with a reader that does not wake for every line (kit/host/proc/pipes.py batch): one that did cost 20-65 us a forward.

#pragma once

#include "mkb_guard.hpp"

#include <sys/stat.h>
#include <sys/syscall.h>

#include <cstdint>
#include <ctime>

namespace mkb {

// exit status of a stamp that could not be written whole, or a stderr replaced
constexpr int kExitStampLost = 8;

// CLOCK_MONOTONIC in integer nanoseconds, by the system call (mkb_guard.hpp: no libc clock).
inline int64_t monotonicNs() {
    struct timespec ts = {0, 0};
    rawSyscall(SYS_clock_gettime, CLOCK_MONOTONIC, reinterpret_cast<long>(&ts), 0);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// the calling thread's CPU time in nanoseconds, by the system call itself: a forward's stamps carry it (the
// process's clock lags by up to a scheduler tick; the thread's includes the running slice)
inline int64_t threadCpuNs() {
    struct timespec ts = {0, 0};
    if (rawSyscall(SYS_clock_gettime, CLOCK_THREAD_CPUTIME_ID, reinterpret_cast<long>(&ts), 0) != 0) return 0;
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// the most characters of an op type a stamp line carries (MNN's longest op type names are about 30)
constexpr int kTypeChars = 48;

class Stamps {
public:
    // Remember what fd 2 is (device and inode); false if it cannot be read.
    bool init() { return identity(&dev_, &ino_); }

    // Write one stamp line: kind 'F'/'E' with the forward's number, 'b'/'e' without (forward < 0); 'b' with the
    // op's type (up to kTypeChars of [A-Za-z0-9_], anything else written as '?', which the kit refuses).  Leaves
    // the runner (kExitStampLost) when the line does not go out whole, or (check) fd 2 is no longer the same file.
    void write(char kind, long forward, int64_t ns, bool check, const char* type = nullptr) const {
        char line[96];
        int n = 0;
        for (const char* p = "@mkbt "; *p != '\0'; ++p) line[n++] = *p;
        line[n++] = kind;
        line[n++] = ' ';
        if (forward >= 0) {
            char digits[20];
            int k = 0;
            do digits[k++] = static_cast<char>('0' + forward % 10); while ((forward /= 10) > 0);
            while (k > 0) line[n++] = digits[--k];
            line[n++] = ' ';
        }
        char hex[16];
        int k = 0;
        uint64_t v = static_cast<uint64_t>(ns);
        do hex[k++] = "0123456789abcdef"[v & 15]; while ((v >>= 4) != 0);
        while (k > 0) line[n++] = hex[--k];
        if (forward >= 0) {  // a forward's stamp: the thread's CPU time too (kit/stages/accounting.py)
            line[n++] = ' ';
            v = static_cast<uint64_t>(threadCpuNs());
            do hex[k++] = "0123456789abcdef"[v & 15]; while ((v >>= 4) != 0);
            while (k > 0) line[n++] = hex[--k];
        }
        if (type != nullptr) {
            line[n++] = ' ';
            for (int c = 0; type[c] != '\0' && c < kTypeChars; ++c) {
                const char ch = type[c];
                const bool word = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
                line[n++] = word ? ch : '?';
            }
        }
        line[n++] = '\n';
        long wrote;
        do wrote = rawSyscall(SYS_write, 2, reinterpret_cast<long>(line), n); while (wrote == -4 /* EINTR */);
        if (wrote != n) leaveNow(kExitStampLost);  // nothing can be said: stderr is what failed
        if (check) checkSame();
    }

    // Leave (kExitStampLost, with a message on the file) when fd 2 is no longer the file it was at init().
    void checkSame() const {
        unsigned long dev = 0, ino = 0;
        if (!identity(&dev, &ino) || dev != dev_ || ino != ino_) {
            const char msg[] = "mkb_runner: error: stderr is no longer the file it was at the start: the stamp "
                               "stream was redirected\n";
            // on stdout too: fd 2 may be the candidate's pipe now
            for (long fd : {2L, 1L}) rawSyscall(SYS_write, fd, reinterpret_cast<long>(msg), sizeof msg - 1);
            leaveNow(kExitStampLost);
        }
    }

private:
    static bool identity(unsigned long* dev, unsigned long* ino) {
        struct stat st = {};
        if (rawSyscall(SYS_fstat, 2, reinterpret_cast<long>(&st), 0) != 0) return false;
        *dev = static_cast<unsigned long>(st.st_dev);
        *ino = static_cast<unsigned long>(st.st_ino);
        return true;
    }

    unsigned long dev_ = 0, ino_ = 0;
};

}  // namespace mkb
