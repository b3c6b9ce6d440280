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
