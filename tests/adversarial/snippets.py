"""C++ snippets the hostile candidates share (the corpus, tests/adversarial/corpus.py, and the anti-cheat set,
tests/test_anticheat_fixture.py): reading the runner's command line from a constructor, rewriting the
runner's results once it is done, system calls the static checks do not see, and a cache keyed on the input's
content."""

#: code at file scope that reads the runner's command line: a shared library's constructors get argc and argv
#: (glibc); gOut is a timing run's output directory (the third argument), empty in verification (plain arrays: a
#: std::string's own initializer may run after this constructor and empty it)
ARGV = r"""#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
namespace {
char gOut[4096];
int gIterations = 0, gWarmup = 0;
__attribute__((constructor)) void mkbReadArgs(int argc, char** argv, char**) {
    for (int i = 1; i + 1 < argc; ++i) {
        if (std::strcmp(argv[i], "--iterations") == 0) gIterations = std::atoi(argv[i + 1]);
        if (std::strcmp(argv[i], "--warmup") == 0) gWarmup = std::atoi(argv[i + 1]);
    }
    if (gIterations > 0 && argc > 3) std::strncpy(gOut, argv[3], sizeof gOut - 1);
}
}
"""
#: ``mkbRewriteResults()``: once the runner is done, every op_ms and total_ms of timing.json divided by 5 and the
#: outputs of both timed input sets (named by their manifests) zeroed: the witness that it ran.  Files through
#: std::basic_*fstream<char>, which the static screen does not name (the sandbox allows the output directory)
REWRITE = ARGV + r"""namespace {
std::string mkbSlurp(const std::string& path) {
    std::basic_ifstream<char> in(path.c_str(), std::ios::binary);
    std::basic_ostringstream<char> all;
    all << in.rdbuf();
    return all.str();
}
std::string mkbFifth(const std::string& json, const std::string& key) {
    size_t at = json.find(key);
    if (at == std::string::npos) return json;
    size_t open = json.find('[', at), close = json.find(']', open);
    std::string list;
    for (const char* p = json.c_str() + open + 1; p < json.c_str() + close;) {
        char* end = nullptr;
        double v = std::strtod(p, &end);
        if (end == p) { ++p; continue; }
        char num[40];
        std::snprintf(num, sizeof num, "%.6f", v / 5.0);
        list += (list.empty() ? "" : ", ") + std::string(num);
        p = end;
    }
    return json.substr(0, open + 1) + list + json.substr(close);
}
void mkbRewriteResults() {
        const std::string dir = gOut;
        std::string timing = dir.empty() ? "" : mkbSlurp(dir + "/timing.json");
        if (timing.empty()) return;
        timing = mkbFifth(mkbFifth(timing, "\"op_ms\""), "\"total_ms\"");
        { std::basic_ofstream<char> out((dir + "/timing.json").c_str()); out << timing; }
        for (int k = 0; k < 2; ++k) {
            const std::string set = dir + "/" + std::to_string(k);
            std::basic_istringstream<char> manifest(mkbSlurp(set + "/manifest.txt"));
            for (std::string line; std::getline(manifest, line);) {
                const std::string bin = set + "/" + line.substr(0, line.find(' ')) + ".bin";
                const std::string bytes = mkbSlurp(bin);
                std::basic_ofstream<char> out(bin.c_str(), std::ios::binary);
                out << std::string(bytes.size(), '\0');
            }
        }
}
}
"""

#: the rewrite run by a static object's destructor, or by an atexit handler, after the runner wrote its results
AT_EXIT = REWRITE + "namespace { struct MkbAtEnd { ~MkbAtEnd() { mkbRewriteResults(); } } gMkbAtEnd; }\n"
ATEXIT_HANDLER = REWRITE + ("namespace { __attribute__((constructor)) void mkbRegister() "
                            "{ std::atexit(mkbRewriteResults); } }\n")

#: ``mkbRaw(n, a, b, c, d)``: an x86-64 system call spelled as the instruction's bytes (0F 05), which neither the
#: source screen (it looks for the mnemonic) nor the symbol check (no import) sees: what is left to the runner's
#: own checks and the sandbox
RAW_SYSCALL = r"""namespace {
long mkbRaw(long n, long a, long b, long c, long d) {
    long r;
    register long r10 __asm__("r10") = d;
    __asm__ volatile(".byte 0x0f, 0x05" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
    return r;
}
}
"""
#: x86-64 system call numbers the process cases use
SYS_FORK, SYS_CLONE, SYS_PAUSE, SYS_WAIT4, SYS_EXIT_GROUP = 57, 56, 34, 61, 231

#: ``mkbSample(x, n, key)``: 8 input values at fixed positions spread over the input (the reviewer's fingerprint)
_SAMPLE = r"""namespace {
void mkbSample(const float* x, size_t n, float* key) {
    for (size_t k = 0; k < 8; ++k) key[k] = x[(n - 1) * k / 7];
}
}
"""

#: ``mkbCacheHit(x, n, out, m)`` / ``mkbCacheStore(...)``: a cache of outputs keyed on the 8 sampled input values
#: (exactly, bit for bit): the cheat that scored 4.04x on the fixture engine while the timed forwards repeated two
#: input sets; on fresh inputs it never hits
CONTENT_CACHE = r"""#include <cstdint>
#include <cstring>
#include <vector>
""" + _SAMPLE + r"""namespace {
struct MkbEntry { float key[8]; std::vector<int32_t> out; };
std::vector<MkbEntry> gMkbCache;
bool mkbCacheHit(const float* x, size_t n, int32_t* out, size_t m) {
    float key[8];
    mkbSample(x, n, key);
    for (const auto& e : gMkbCache) {
        if (std::memcmp(e.key, key, sizeof key) == 0 && e.out.size() == m) {
            std::memcpy(out, e.out.data(), m * sizeof(int32_t));
            return true;
        }
    }
    return false;
}
void mkbCacheStore(const float* x, size_t n, const int32_t* out, size_t m) {
    MkbEntry e;
    mkbSample(x, n, e.key);
    e.out.assign(out, out + m);
    if (gMkbCache.size() < 8) gMkbCache.push_back(e);
}
}
"""

#: ``mkbSeenHit(...)`` / ``mkbSeenStore(...)``: a cache adapted to inputs that are the same values in another order:
#: it replays the output of the last input it computed whenever every sampled value is one it has seen before
#: (a table of every input value), as a kernel that expects a shuffle of a known input would
SEEN_VALUES = r"""#include <cstdint>
#include <cstring>
#include <unordered_set>
#include <vector>
""" + _SAMPLE + r"""namespace {
std::unordered_set<uint32_t> gMkbSeen;
std::vector<int32_t> gMkbLast;
uint32_t mkbBits(float v) { uint32_t b; std::memcpy(&b, &v, 4); return b; }
bool mkbSeenHit(const float* x, size_t n, int32_t* out, size_t m) {
    if (gMkbLast.size() != m) return false;
    float key[8];
    mkbSample(x, n, key);
    for (float v : key) {
        if (gMkbSeen.count(mkbBits(v)) == 0) return false;
    }
    std::memcpy(out, gMkbLast.data(), m * sizeof(int32_t));
    return true;
}
void mkbSeenStore(const float* x, size_t n, const int32_t* out, size_t m) {
    for (size_t i = 0; i < n; ++i) gMkbSeen.insert(mkbBits(x[i]));
    gMkbLast.assign(out, out + m);
}
}
"""

#: ``mkbRewriteTiming(path)``: once ``path`` (timing.json) is complete (its last key written, a newline at its end),
#: every op_ms and total_ms divided by 5; waits up to 60 s, 0.1 ms between looks (nanosleep by the instruction)
REWRITE_TIMING = REWRITE + RAW_SYSCALL + r"""namespace {
void mkbRewriteTiming(const std::string& path) {
    for (long k = 0; k < 600000; ++k) {
        std::string s = mkbSlurp(path);
        if (s.size() > 2 && s.find("\"checked\"") != std::string::npos && s.back() == '\n') {
            s = mkbFifth(mkbFifth(s, "\"op_ms\""), "\"total_ms\"");
            std::basic_ofstream<char> out(path.c_str());
            out << s;
            return;
        }
        struct { long s, ns; } pause = {0, 100000};
        mkbRaw(35 /* nanosleep */, (long)&pause, 0, 0, 0);
    }
}
}
"""
#: a sibling of the runner (clone with CLONE_PARENT: the sandbox's init is its parent, not the runner, so wait4
#: never sees it), made on the first forward of a timing run, that rewrites timing.json once the runner wrote it
SIBLING_REWRITE = REWRITE_TIMING + r"""namespace {
bool mkbSibling() {
    if (gIterations > 0 && mkbRaw(56 /* clone */, 0x8000 /* CLONE_PARENT */ | 17 /* SIGCHLD */, 0, 0, 0) == 0) {
        mkbRewriteTiming(std::string(gOut) + "/timing.json");
        mkbRaw(231 /* exit_group */, 0, 0, 0, 0);
    }
    return true;
}
}
"""
#: a double fork from a static constructor of the library, before the runner's main makes itself subreaper: the
#: grandchild is reparented to the sandbox's init; in timing runs only, it rewrites timing.json as above
CTOR_DOUBLE_FORK = REWRITE_TIMING + r"""namespace {
__attribute__((constructor(200))) void mkbForkEarly(int argc, char** argv, char**) {
    bool timed = false;
    for (int i = 1; i + 1 < argc; ++i) timed = timed || (std::strcmp(argv[i], "--iterations") == 0 && std::atoi(argv[i + 1]) > 0);
    if (!timed || argc <= 3) return;
    const std::string path = std::string(argv[3]) + "/timing.json";
    long pid = mkbRaw(57 /* fork */, 0, 0, 0, 0);
    if (pid == 0) {
        if (mkbRaw(57, 0, 0, 0, 0) == 0) mkbRewriteTiming(path);
        mkbRaw(231 /* exit_group */, 0, 0, 0, 0);
    }
    int status = 0;
    mkbRaw(61 /* wait4 */, pid, (long)&status, 0, 0);
}
}
"""

#: ``mkbPlant(kind)``: before the runner writes them, the first input set's output file ``y.bin`` (in
#: ``<out>/0/``) made a symbolic link to /dev/zero (kind 0: the runner's writes vanish there, and a reader that
#: follows it reads for ever) or a FIFO the candidate holds open for reading (kind 1: the runner's write does
#: not block; a reader that opens it blocks until a writer comes).  By system calls the static checks do not see.
PLANT = RAW_SYSCALL + r"""#include <string>
namespace {
char gOutDir[4096];
__attribute__((constructor)) void mkbOutArg(int argc, char** argv, char**) {
    if (argc > 3) for (size_t i = 0; i + 1 < sizeof gOutDir && argv[3][i] != 0; ++i) gOutDir[i] = argv[3][i];
}
bool mkbPlant(int kind) {
    static const char zero[] = {'/', 'd', 'e', 'v', '/', 'z', 'e', 'r', 'o', 0};
    const std::string dir = std::string(gOutDir) + "/0", file = dir + "/y.bin";
    mkbRaw(83 /* mkdir */, (long)dir.c_str(), 0755, 0, 0);
    if (kind == 0) {
        mkbRaw(88 /* symlink */, (long)zero, (long)file.c_str(), 0, 0);
    } else if (mkbRaw(133 /* mknod */, (long)file.c_str(), 0010000 /* S_IFIFO */ | 0644, 0, 0) == 0) {
        mkbRaw(2 /* open */, (long)file.c_str(), 2 /* O_RDWR */, 0, 0);  // held open: the runner's write goes through
    }
    return true;
}
}
"""

#: ``mkbScaleTimes(t)``: no system call at all: walks the main thread's stack from this frame up to the
#: environment for std::vector<double> headers {begin, end, capacity} that hold ``t`` plausible times (the
#: runner's arrays of op and forward times, on its stack) and multiplies the entries not scaled yet by 0.25.
#: Called at the start of timed forward ``t + 1``: every time but the last forward's is scaled
SCALE_TIMES = ARGV + r"""#include <cstdint>
#include <unistd.h>
namespace {
struct MkbScaled { uintptr_t header; size_t done; };
MkbScaled gScaled[8];
int gNScaled = 0;
void mkbScaleTimes(size_t t) {
    const uintptr_t lo = (uintptr_t)__builtin_frame_address(0), hi = (uintptr_t)environ;
    for (uintptr_t a = (lo + 7) & ~(uintptr_t)7; a + 24 <= hi; a += 8) {
        const volatile uintptr_t* w = (const volatile uintptr_t*)a;
        const uintptr_t b = w[0], e = w[1], c = w[2];
        if (b == 0 || (b & 7) || e < b || c < e || c - b > (1u << 20) || e - b != 8 * t || (b >= lo && b < hi)) continue;
        volatile double* v = (volatile double*)b;
        bool times = true;
        for (size_t k = 0; k < t && times; ++k) times = v[k] > 1e-6 && v[k] < 1e5;
        if (!times) continue;
        int s = 0;
        while (s < gNScaled && gScaled[s].header != a) ++s;
        if (s == gNScaled) {
            if (gNScaled == 8) continue;
            gScaled[gNScaled++] = {a, 0};
        }
        for (size_t k = gScaled[s].done; k < t; ++k) v[k] = v[k] * 0.25;
        gScaled[s].done = t;
    }
}
}
"""
#: ``mkbForgeStamps()``: an op of 1 us, now, in the form of the runner's stamp lines (kit/mnn/stamps.py), printed
#: on stderr through stdio (which the static checks allow): the stream holds lines the runner did not write
FORGE_STAMPS = r"""#include <cstdio>
#include <ctime>
namespace {
void mkbForgeStamps() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const unsigned long long ns = (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
    std::fprintf(stderr, "@mkbt b %llx ArgMax\n@mkbt e %llx\n", ns, ns + 1000);
}
}
"""
#: ``mkbRestartClocks()``: every 8-byte word on the main thread's stack, from this frame up to environ, that holds a
#: CLOCK_MONOTONIC reading of the last 5 ms in nanoseconds (the op clock's start, the forward's t0) is set to now:
#: the op (and the forward) look as if they began now
RESTART_CLOCKS = ARGV + r"""#include <cstdint>
#include <ctime>
#include <unistd.h>
namespace {
void mkbRestartClocks() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    const uintptr_t lo = (uintptr_t)__builtin_frame_address(0), hi = (uintptr_t)environ;
    for (uintptr_t a = (lo + 7) & ~(uintptr_t)7; a + 8 <= hi; a += 8) {
        volatile int64_t* w = (volatile int64_t*)a;
        if (*w > now - 5000000 && *w < now) *w = now;
    }
}
}
"""
#: x86-64 system call numbers of the descriptor cases
SYS_CLOSE, SYS_PIPE, SYS_DUP2 = 3, 22, 33
