// mkb_runner for the fixture engine: the kit's runner protocol.
//
//   mkb_runner <model_file> <in_dir> <out_dir> --outputs y[,z] [--threads N] [--precision high|normal|low]
//              [--warmup W] [--iterations N] [--op-types A,B|*] [--wait-go 0|1] [--extra-threads E]
//              [--checked K] [--pid-ns 0|1]
//
// An input set is a directory with manifest.txt, one line per input "name dtype ndim d0 d1 ..." (dtype
// float32|int32), and <name>.bin per input (raw little-endian, C order); the first set's shapes may differ from the
// model's (the inputs are resized, dimensions of 0 included) and every set must keep them.  in_dir is one set (in_dir/manifest.txt,
// outputs to out_dir) or several, in_dir/0/, in_dir/1/, ... (outputs of set k to out_dir/k/).  --iterations 0
// (default): one run per set, in order.  N > 0: W warm-up runs, then N timed runs (N >= S sets): timed run i < S
// on set i, whose outputs are written; every other run on fresh inputs derived from the sets before it (each
// tensor a random sample without replacement of the sets' elements); --checked K of the timed runs on fresh
// inputs, picked at random after each, are written with their inputs to out_dir/checked/<j>/{in,out}/; a
// float32 output of a timed run that still holds the poison is exit 6; and out_dir/timing.json with
// {"op_ms": [N values], "total_ms": [N values], "op_types": {"<type>": count per run}, "phase_ms": P,
// "checked": [timed run numbers]} where
// op_ms is the summed wall time (ms) of executed ops whose type is in --op-types ("*" = all), total_ms the whole
// forward, phase_ms the wall time from reading "go" (without --wait-go, from the same point) to the end of the
// timed runs; the clock is CLOCK_MONOTONIC read by the system call itself (a library cannot replace it).
// Outputs go to <name>.bin plus manifest.txt (same line format).
// The stamp stream (the kit's runner: kit/mnn/runner/mkb_stamps.hpp, where the why is): in every timed run, its
// begin, every op's begin (with its type) and end, and its end are written to stderr as they are read, one write
// system call each ("@mkbt F <i> <ns> <cpu>", "@mkbt b <ns> <Type>", "@mkbt e <ns>", "@mkbt E <i> <ns> <cpu>"; cpu: the
// CPU time of the main thread, which writes them (CLOCK_THREAD_CPUTIME_ID), in hex nanoseconds; ns: CLOCK_MONOTONIC in hex
// nanoseconds), and stderr must stay the file it was at the start (exit 8 otherwise, or for a short write).
// --wait-go 1: after loading, print "mkb_runner: ready" on stdout and wait for the line "go" on stdin.
// Around every run: inputs copied in and outputs filled with 0xFF bytes (NaN) before it; after it every input
// must hold its bytes still, and the process may have no thread but the main one (the engine has no pool;
// and --extra-threads E (default 0) that are not the program's (an emulator's own: qemu-user adds one); also
// checked before the first run and before the results are written).  The runner leaves by the exit_group
// system call right after writing its results (and on every error): no destructor or atexit handler of the
// candidate's library runs after them.
// Exit status: 0 success, 2 bad command line, 3 load or run error or no "go", 4 a run changed an input,
// 5 a thread left running, 6 a timed run left a float32 output unwritten, 7 a process besides the runner (its
// children, whose subreaper it is, and with --pid-ns 1 (in the sandbox's PID namespace) any other process and
// a parent other than the sandbox's init; before the first run, after every run and before the results),
// 9 a system call the seccomp filter refuses once start-up is done, 10 a mapping larger than the memory limit
// leaves (mkb_lockdown.hpp: the kit's runner's own header, kit/mnn/runner/, which every copy of this tree gets
// in this folder: kit.mnn.source.copy_fixture_tree) (message on stderr).
#include <sys/stat.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/Net.hpp"
#include "mkb_lockdown.hpp"

using namespace MNN;

namespace {

struct Options {
    std::string model, inDir, outDir;
    std::vector<std::string> outputs;
    std::set<std::string> opTypes;  // empty = all
    int threads = 1, warmup = 1, iterations = 0, waitGo = 0, extraThreads = 0, checked = 0, pidNamespace = 0;
    Precision precision = Precision::Normal;
    std::string precisionName = "normal";
};

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> parts;
    std::string cur;
    std::istringstream in(s);
    while (std::getline(in, cur, sep)) {
        if (!cur.empty()) parts.push_back(cur);
    }
    return parts;
}

int usage(const char* why) {
    std::fprintf(stderr,
                 "mkb_runner: %s\nusage: mkb_runner <model_file> <in_dir> <out_dir> --outputs y[,z] [--threads N] "
                 "[--precision high|normal|low] [--warmup W] [--iterations N] [--op-types A,B|*] [--wait-go 0|1] "
                 "[--extra-threads E] [--checked K] [--pid-ns 0|1]\n",
                 why);
    return 2;
}

int fail(const std::string& why, int code = 3) {
    std::fprintf(stderr, "mkb_runner: %s\n", why.c_str());
    return code;
}

// CLOCK_MONOTONIC in integer nanoseconds by the syscall instruction: libc's clock_gettime (and syscall) may be
// replaced by a symbol of the candidate's libMNN.so, which the runner's lookups reach before libc.
int64_t nowNs() {
    struct timespec ts = {0, 0};
#if defined(__x86_64__)
    long ret;
    __asm__ volatile("syscall" : "=a"(ret) : "a"(SYS_clock_gettime), "D"(CLOCK_MONOTONIC), "S"(&ts)
                     : "rcx", "r11", "memory");
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = SYS_clock_gettime;
    register long x0 __asm__("x0") = CLOCK_MONOTONIC;
    register long x1 __asm__("x1") = reinterpret_cast<long>(&ts);
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1) : "memory", "cc");
#else
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
#endif
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// the same clock in milliseconds
double nowMs() { return static_cast<double>(nowNs()) * 1e-6; }

// A system call of up to three arguments by the instruction itself (libc's wrappers may be the candidate's).
long rawSyscall(long n, long a, long b, long c, long d = 0) {
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

// the calling thread's CPU time in nanoseconds, by the system call itself: a forward's stamps carry it
int64_t cpuNs() {
    struct timespec ts = {0, 0};
    if (rawSyscall(SYS_clock_gettime, CLOCK_THREAD_CPUTIME_ID, reinterpret_cast<long>(&ts), 0) != 0) return 0;
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Leave now by exit_group: a return from main (exit()) would run the static destructors and atexit handlers
// of the candidate's library after the results exist, and one that rewrote timing.json (every time / 5) made
// a 5.4x speedup of nothing.  stdio is flushed first (exit_group does not).
[[noreturn]] void leave(int code) {
    std::fflush(stdout);
    std::fflush(stderr);
    for (;;) rawSyscall(SYS_exit_group, code, 0, 0);
}

// The stamp stream on fd 2 (see the top of this file): one line per write, the runner left (exit 8) when a line
// does not go out whole or fd 2 is no longer the file it was at the start.
struct Stamps {
    unsigned long dev = 0, ino = 0;
    static bool identity(unsigned long* d, unsigned long* i) {
        struct stat st = {};
        if (rawSyscall(SYS_fstat, 2, reinterpret_cast<long>(&st), 0) != 0) return false;
        *d = st.st_dev;
        *i = st.st_ino;
        return true;
    }
    bool init() { return identity(&dev, &ino); }
    void check() const {
        unsigned long d = 0, i = 0;
        if (!identity(&d, &i) || d != dev || i != ino) {
            const char msg[] = "mkb_runner: stderr is no longer the file it was at the start: the stamp stream was redirected\n";
            for (long fd : {2L, 1L}) rawSyscall(SYS_write, fd, reinterpret_cast<long>(msg), sizeof msg - 1);  // fd 2 may be the candidate's
            leave(8);
        }
    }
    // kind F/E with the run's number, b/e without (forward < 0), b with the op's type; check: fd 2's identity
    // after the write
    void write(char kind, long forward, int64_t ns, bool checkAfter, const char* type = nullptr) const {
        char line[96];
        const auto hex = static_cast<unsigned long long>(ns);
        int n = forward >= 0 ? std::snprintf(line, sizeof line, "@mkbt %c %ld %llx %llx\n", kind, forward, hex,
                                             static_cast<unsigned long long>(cpuNs()))
                : type != nullptr ? std::snprintf(line, sizeof line, "@mkbt %c %llx %.48s\n", kind, hex, type)
                                  : std::snprintf(line, sizeof line, "@mkbt %c %llx\n", kind, hex);
        long wrote;
        do wrote = rawSyscall(SYS_write, 2, reinterpret_cast<long>(line), n); while (wrote == -4 /* EINTR */);
        if (wrote != n) leave(8);
        if (checkAfter) check();
    }
};

int threadCount() {
    std::ifstream status("/proc/self/status");
    std::string key;
    int n = -1;
    while (status >> key) {
        if (key == "Threads:" && (status >> n)) return n;
    }
    return -1;
}

// The threads that may still run user code: when "Threads:" counts more than `own`, the tasks already exiting
// (a joined thread's, still listed for a moment after pthread_join returned) are left out (mkb_lockdown.hpp).
int liveThreadCount(int own) {
    int n = threadCount();
    return n > own ? mkb_lockdown::liveThreads() : n;
}

// The output folder's descriptor (opened before the lockdown) and its path: every file and folder the runner
// makes afterwards goes through it (openat, mkdirat), the one way the seccomp filter leaves to create a file.
int gOutFd = -1;
std::string gOutDir;

// {dirfd, path} of `path`: relative to gOutFd when it lies below the output folder
std::pair<int, std::string> underOut(const std::string& path) {
    if (gOutFd >= 0 && path.size() > gOutDir.size() + 1 && path.compare(0, gOutDir.size(), gOutDir) == 0 &&
        path[gOutDir.size()] == '/') {
        return {gOutFd, path.substr(gOutDir.size() + 1)};
    }
    return {AT_FDCWD, path};
}

void makeDir(const std::string& dir) {
    if (dir == gOutDir) return;
    const auto at = underOut(dir);
    mkdirat(at.first, at.second.c_str(), 0755);
}

// write `bytes` to a new file at path (replaced if it exists), closed before it returns
bool writeFile(const std::string& path, const char* bytes, size_t size) {
    const auto at = underOut(path);
    int fd = openat(at.first, at.second.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    for (size_t done = 0; done < size;) {
        ssize_t n = write(fd, bytes + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            close(fd);
            return false;
        }
        done += static_cast<size_t>(n);
    }
    return close(fd) == 0;
}

bool parseInt(const char* s, int minValue, int* out) {
    char* end = nullptr;
    long v = std::strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < minValue || v > 1000000) return false;
    *out = static_cast<int>(v);
    return true;
}

struct InputData {
    std::string name;
    std::vector<char> bytes;
    std::vector<int> dims;  // as its manifest gives them (the model's declared shape: a kernel may change the tensor's)
};

// first: the process's first input set, whose shapes the model takes (a shape other than the declared one resizes
// the input, as MNN's Module does with shapeMutable; a dimension may be 0); every later set must keep them.
bool readInputs(const std::string& dir, Net* net, std::vector<InputData>* data, std::string* err, bool first) {
    std::ifstream manifest(dir + "/manifest.txt");
    if (!manifest) {
        *err = "cannot open " + dir + "/manifest.txt";
        return false;
    }
    std::string line;
    std::set<std::string> seen;
    int lineNo = 0;
    while (std::getline(manifest, line)) {
        ++lineNo;
        std::istringstream in(line);
        std::string name, dtype;
        int ndim = -1;
        if (!(in >> name)) continue;  // blank line
        std::string where = dir + "/manifest.txt:" + std::to_string(lineNo) + ": ";
        if (!(in >> dtype >> ndim) || ndim < 0) {
            *err = where + "expected 'name dtype ndim dims...'";
            return false;
        }
        std::vector<int> dims(ndim);
        for (int& d : dims) {
            if (!(in >> d) || d < 0) {
                *err = where + "bad dimension";
                return false;
            }
        }
        Tensor* t = net->getTensor(name);
        bool isInput = false;
        for (const auto& n : net->inputNames()) isInput = isInput || n == name;
        if (t == nullptr || !isInput) {
            *err = where + "'" + name + "' is not an input of the model";
            return false;
        }
        DataType type;
        if (!parseDataType(dtype.c_str(), &type)) {
            *err = where + "unsupported dtype " + dtype;
            return false;
        }
        if (type != t->type() || (dims != t->shape() && !first)) {
            *err = where + "input '" + name + "' does not match the model's type or the first set's shape";
            return false;
        }
        if (dims != t->shape()) t->resize(dims, type);  // before Net::prepare, which infers the other shapes
        std::ifstream bin(dir + "/" + name + ".bin", std::ios::binary);
        std::vector<char> bytes((std::istreambuf_iterator<char>(bin)), std::istreambuf_iterator<char>());
        if (!bin.good() && !bin.eof()) {
            *err = "cannot read " + dir + "/" + name + ".bin";
            return false;
        }
        if (bytes.size() != t->size()) {
            *err = dir + "/" + name + ".bin has " + std::to_string(bytes.size()) + " bytes, expected " +
                   std::to_string(t->size());
            return false;
        }
        data->push_back({name, std::move(bytes), dims});
        seen.insert(name);
    }
    for (const auto& n : net->inputNames()) {
        if (seen.count(n) == 0) {
            *err = "input '" + n + "' missing from " + dir + "/manifest.txt";
            return false;
        }
    }
    return true;
}

struct Set {
    std::vector<InputData> inputs;
    std::string outDir;
};

// in_dir itself when it has a manifest, else in_dir/0, in_dir/1, ... (each output dir created)
bool readSets(const Options& o, Net* net, std::vector<Set>* sets, std::string* err) {
    struct stat st;
    if (::stat((o.inDir + "/manifest.txt").c_str(), &st) == 0) {
        sets->push_back({{}, o.outDir});
        return readInputs(o.inDir, net, &sets->back().inputs, err, true);
    }
    for (int k = 0; ::stat((o.inDir + "/" + std::to_string(k) + "/manifest.txt").c_str(), &st) == 0; ++k) {
        sets->push_back({{}, o.outDir + "/" + std::to_string(k)});
        if (!readInputs(o.inDir + "/" + std::to_string(k), net, &sets->back().inputs, err, k == 0)) return false;
    }
    if (sets->empty()) *err = "no " + o.inDir + "/manifest.txt nor " + o.inDir + "/0/manifest.txt";
    return !sets->empty();
}

// ---- fresh inputs (the kit's runner: kit/mnn/runner/mkb_fresh.hpp, where the why and the measurements are) ----

bool randomBytes(void* p, size_t n) {
    char* b = static_cast<char*>(p);
    while (n > 0) {
        long got = rawSyscall(SYS_getrandom, reinterpret_cast<long>(b), static_cast<long>(n), 0);
        if (got == -4) continue;  // EINTR
        if (got <= 0) return false;
        b += got;
        n -= static_cast<size_t>(got);
    }
    return true;
}

struct Rng {  // splitmix64 (Steele, Lea and Flood, OOPSLA 2014)
    uint64_t state = 0;
    uint64_t next() {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    uint64_t below(uint64_t n) { return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }
};

// Per tensor: a random sample without replacement of the 4-byte elements of all sets, in random order (the
// fixture's tensors are small: element by element; the kit's runner moves 64-element units of large ones).
struct Fresh {
    std::vector<std::vector<uint32_t>> order;  // per tensor: set * elements + element, shuffled run after run
    Rng rng;
    bool init(const std::vector<Set>& sets) {
        if (!randomBytes(&rng.state, sizeof rng.state)) return false;
        for (const auto& in : sets[0].inputs) {
            order.emplace_back(sets.size() * (in.bytes.size() / 4));
            for (size_t i = 0; i < order.back().size(); ++i) order.back()[i] = static_cast<uint32_t>(i);
        }
        return true;
    }
    void next(const std::vector<Set>& sets, Set* out) {
        for (size_t t = 0; t < order.size(); ++t) {
            const size_t n = sets[0].inputs[t].bytes.size() / 4;
            auto& ord = order[t];
            for (size_t i = 0; i < n; ++i) {
                size_t j = i + static_cast<size_t>(rng.below(ord.size() - i));
                std::swap(ord[i], ord[j]);
                std::memcpy(out->inputs[t].bytes.data() + 4 * i, sets[ord[i] / n].inputs[t].bytes.data() + 4 * (ord[i] % n), 4);
            }
        }
    }
};

// Selection sampling (Knuth, TAOCP 2, 3.4.2, algorithm S), each decision by fresh getrandom bytes after the forward.
struct Picker {
    size_t want = 0, candidates = 0, seen = 0, picked = 0;
    bool pick() {
        const size_t left = candidates - seen++;
        uint64_t r = 0;
        if (picked >= want || left == 0 || !randomBytes(&r, sizeof r)) return false;
        Rng one{r};
        if (one.below(left) >= want - picked) return false;
        ++picked;
        return true;
    }
};

// ---- processes: the runner is its descendants' subreaper; inside a PID namespace (--pid-ns 1, the kit's word:
// bubblewrap's own /proc shows one NSpid level only) /proc may list only the runner and the sandbox's init, its
// parent (the kit's runner: kit/mnn/runner/mkb_guard.hpp, where the why is) ----

struct Own {
    std::set<long> pids;  // empty: not listed (the host's PID namespace)
    long parent = 0;
};

Own ownProcesses(bool toldPidNamespace) {
    Own own;
    std::ifstream status("/proc/self/status");
    std::string line;
    int levels = 0;
    while (std::getline(status, line)) {
        if (line.rfind("NSpid:", 0) == 0) {
            std::istringstream in(line.substr(6));
            for (long v; in >> v;) ++levels;
        }
    }
    if (!toldPidNamespace && levels < 2) return own;
    own.pids = {rawSyscall(SYS_getpid, 0, 0, 0), 1};
    own.parent = rawSyscall(SYS_getppid, 0, 0, 0);
    return own;
}

// "" or what process exists besides the runner
std::string otherProcess(const Own& own) {
    if (!own.pids.empty() && own.parent != 1) {
        return "the runner's parent, process " + std::to_string(own.parent) + " (not the sandbox's init),";
    }
    int status = 0;
    long child = rawSyscall(SYS_wait4, -1, reinterpret_cast<long>(&status), 1 /* WNOHANG */ | 0x40000000 /* __WALL */, 0);
    if (child > 0) return "process " + std::to_string(child);
    if (child == 0) return "a child process";
    if (own.pids.empty()) return "";
    DIR* d = opendir("/proc");
    if (d == nullptr) return "an unknown process (/proc cannot be listed)";
    std::string found;
    for (struct dirent* e; found.empty() && (e = readdir(d)) != nullptr;) {
        char* end = nullptr;
        long pid = std::strtol(e->d_name, &end, 10);
        if (end != e->d_name && *end == '\0' && own.pids.count(pid) == 0) found = "process " + std::to_string(pid);
    }
    closedir(d);
    return found;
}

// whether a float32 tensor still holds a word of the runner's poison (0xFFFFFFFF: no arithmetic makes it)
bool holdsPoison(const Tensor* x) {
    if (x->type() != DataType::Float32) return false;
    const char* p = x->host<char>();
    for (size_t i = 0; i + 4 <= x->size(); i += 4) {
        uint32_t w;
        std::memcpy(&w, p + i, 4);
        if (w == 0xFFFFFFFFu) return true;
    }
    return false;
}

struct Taken {
    std::string manifest;
    std::vector<std::vector<char>> bytes;
};

Taken take(const Options& o, Net* net) {
    Taken t;
    for (const auto& name : o.outputs) {
        const Tensor* x = net->getTensor(name);
        t.bytes.emplace_back(x->host<char>(), x->host<char>() + x->size());
        t.manifest += name + " " + dataTypeName(x->type()) + " " + std::to_string(x->dimensions());
        for (int d : x->shape()) t.manifest += " " + std::to_string(d);
        t.manifest += "\n";
    }
    return t;
}

bool writeTensors(const std::vector<std::string>& names, const Taken& t, const std::string& dir, std::string* err) {
    makeDir(dir);
    for (size_t i = 0; i < names.size(); ++i) {
        std::string path = dir + "/" + names[i] + ".bin";
        if (!writeFile(path, t.bytes[i].data(), t.bytes[i].size())) {
            *err = "cannot write " + path;
            return false;
        }
    }
    if (!writeFile(dir + "/manifest.txt", t.manifest.data(), t.manifest.size())) {
        *err = "cannot write " + dir + "/manifest.txt";
        return false;
    }
    return true;
}

bool writeOutputs(const Options& o, const Taken& t, const std::string& dir, std::string* err) {
    return writeTensors(o.outputs, t, dir, err);
}

std::string jsonList(const std::vector<double>& v) {
    std::string json = "[";
    char buf[64];
    for (size_t i = 0; i < v.size(); ++i) {
        std::snprintf(buf, sizeof buf, "%s%.6f", i ? ", " : "", v[i]);
        json += buf;
    }
    return json + "]";
}

int runMain(int argc, char** argv) {
    Options o;
    std::vector<std::string> positional;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a.rfind("--", 0) != 0) {
            positional.push_back(a);
            continue;
        }
        if (i + 1 >= argc) return usage(("missing value for " + a).c_str());
        const char* v = argv[++i];
        if (a == "--outputs") {
            o.outputs = split(v, ',');
        } else if (a == "--threads") {
            if (!parseInt(v, 1, &o.threads)) return usage("--threads must be an integer >= 1");
        } else if (a == "--warmup") {
            if (!parseInt(v, 0, &o.warmup)) return usage("--warmup must be an integer >= 0");
        } else if (a == "--iterations") {
            if (!parseInt(v, 0, &o.iterations)) return usage("--iterations must be an integer >= 0");
        } else if (a == "--precision") {
            o.precisionName = v;
            if (o.precisionName == "high") o.precision = Precision::High;
            else if (o.precisionName == "normal") o.precision = Precision::Normal;
            else if (o.precisionName == "low") o.precision = Precision::Low;
            else return usage("--precision must be high, normal or low");
        } else if (a == "--wait-go") {
            if (!parseInt(v, 0, &o.waitGo)) return usage("--wait-go must be 0 or 1");
        } else if (a == "--checked") {
            if (!parseInt(v, 0, &o.checked)) return usage("--checked must be an integer >= 0");
        } else if (a == "--pid-ns") {
            if (!parseInt(v, 0, &o.pidNamespace)) return usage("--pid-ns must be 0 or 1");
        } else if (a == "--extra-threads") {
            if (!parseInt(v, 0, &o.extraThreads)) return usage("--extra-threads must be an integer >= 0");
        } else if (a == "--op-types") {
            if (std::string(v) != "*") {
                for (const auto& t : split(v, ',')) o.opTypes.insert(t);
            }
        } else {
            return usage(("unknown option " + a).c_str());
        }
    }
    if (positional.size() != 3) return usage("expected <model_file> <in_dir> <out_dir>");
    if (o.outputs.empty()) return usage("--outputs is required");
    o.model = positional[0];
    o.inDir = positional[1];
    o.outDir = positional[2];

    std::string err;
    std::unique_ptr<Net> net(Net::createFromFile(o.model.c_str(), &err));
    if (!net) return fail("cannot load model: " + err);
    for (const auto& name : o.outputs) {
        bool known = false;
        for (const auto& n : net->outputNames()) known = known || n == name;
        if (!known) return fail("'" + name + "' is not an output of the model");
    }
    std::vector<Set> sets;
    if (!readSets(o, net.get(), &sets, &err)) return fail(err);
    if (o.iterations > 0 && static_cast<size_t>(o.iterations) < sets.size()) {
        return usage("--iterations must be at least the number of input sets");
    }
    if (!net->prepare(o.threads, o.precision, &err)) return fail("cannot prepare model: " + err);
    mkdir(o.outDir.c_str(), 0755);
    gOutDir = o.outDir;
    gOutFd = open(o.outDir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (gOutFd < 0) return fail("cannot open the output folder " + o.outDir);
    if (threadCount() < 0) return fail("cannot read the thread count from /proc/self/status");
    const int ownThreads = 1 + o.extraThreads;  // the main thread and the emulator's
    if (threadCount() != ownThreads) return fail("threads running before the first run (the engine has none)", 5);
    rawSyscall(SYS_prctl, 36 /* PR_SET_CHILD_SUBREAPER */, 1, 0, 0);  // a process forked twice comes back to us
    const Own own = ownProcesses(o.pidNamespace != 0);
    {
        std::string other = otherProcess(own);
        if (!other.empty()) return fail(other + " exists before the first run, besides the runner", 7);
    }
    // start-up done: the seccomp filter from here on (mkb_lockdown.hpp); without it, a note under an emulator
    // (--extra-threads > 0: qemu-user has no seccomp), exit 9 anywhere else (a filter of the candidate's, from a
    // static constructor, could refuse or fake the call)
#ifndef MKB_NO_LOCKDOWN  // defined only to measure what the filter costs (docs/untrusted.md)
    if (const char* why = mkb_lockdown::lockDown(gOutFd)) {
        if (o.extraThreads == 0) return fail(std::string("cannot install the runner's seccomp filter: ") + why, 9);
        std::fprintf(stderr, "mkb_runner: note: no seccomp filter: %s; the runner's other checks stand\n", why);
    }
#endif
    if (o.waitGo) {  // loaded and prepared: wait for the go of the timing phase
        std::printf("mkb_runner: ready\n");
        std::fflush(stdout);
        char line[16] = {0};
        if (std::fgets(line, sizeof line, stdin) == nullptr || std::strncmp(line, "go", 2) != 0) {
            return fail("no \"go\" on stdin after \"ready\"");
        }
    }
    const double phaseStart = nowMs();

    Stamps stamps;
    if (!stamps.init()) return fail("cannot fstat stderr, where the stamp stream goes");
    int64_t opStart = 0;
    double opMs = 0.0;
    std::map<std::string, int> opCounts;
    auto selected = [&](const Op& op) { return o.opTypes.empty() || o.opTypes.count(opTypeName(op.type)) > 0; };
    // every op stamped with its type (the kit selects the timed types itself, from the stream)
    Net::OpCallback before = [&](const Op& op) {
        opStart = nowNs();
        stamps.write('b', -1, opStart, false, opTypeName(op.type));
    };
    Net::OpCallback after = [&](const Op& op) {
        const int64_t end = nowNs();
        stamps.write('e', -1, end, true);
        opCounts[opTypeName(op.type)] += 1;
        if (selected(op)) opMs += static_cast<double>(end - opStart) * 1e-6;
    };
    // one run on set k: inputs in, outputs poisoned; afterwards inputs unchanged and no thread left
    int runs = 0;
    // timed: the run's 1-based number among the timed runs (0: untimed); its stamps go to the stream
    auto once = [&](const Set& set, long timed, double* totalMs) -> int {
        for (const auto& in : set.inputs) std::memcpy(net->getTensor(in.name)->host<char>(), in.bytes.data(), in.bytes.size());
        for (const auto& name : o.outputs) {
            bool isInput = false;
            for (const auto& in : set.inputs) isInput = isInput || in.name == name;
            Tensor* t = net->getTensor(name);
            if (!isInput) std::memset(t->host<char>(), 0xFF, t->size());
        }
        const int64_t start = nowNs();
        if (timed > 0) stamps.write('F', timed, start, true);
        bool ok = timed ? net->run(before, after, &err) : net->run(nullptr, nullptr, &err);
        const int64_t end = nowNs();
        if (timed > 0) stamps.write('E', timed, end, true);
        if (totalMs != nullptr) *totalMs = static_cast<double>(end - start) * 1e-6;
        if (!ok) return fail("run failed: " + err);
        ++runs;
        for (const auto& in : set.inputs) {
            if (std::memcmp(net->getTensor(in.name)->host<char>(), in.bytes.data(), in.bytes.size()) != 0) {
                return fail("input '" + in.name + "' was modified by run " + std::to_string(runs), 4);
            }
        }
        int threads = liveThreadCount(ownThreads);
        if (threads != ownThreads) {
            return fail(std::to_string(threads) + " threads after run " + std::to_string(runs) +
                        " (the engine has none but the main one): a thread was left running", 5);
        }
        std::string other = otherProcess(own);
        if (!other.empty()) {
            return fail(other + " exists after run " + std::to_string(runs) + ", besides the runner: the candidate "
                        "started a process", 7);
        }
        return 0;
    };

    if (o.iterations == 0) {
        for (const auto& set : sets) {
            if (int rc = once(set, 0, nullptr)) return rc;
            if (!writeOutputs(o, take(o, net.get()), set.outDir, &err)) return fail(err);
        }
        return 0;
    }
    // every forward but the first timed one on each set runs on fresh inputs, derived before it; `picker` picks
    // --checked of the timed ones after each, written out with their inputs for the kit
    Fresh fresh;
    Set derived = sets[0];
    if (!fresh.init(sets)) return fail("no random bytes from getrandom");
    Picker picker{static_cast<size_t>(o.checked), static_cast<size_t>(o.iterations) - sets.size()};
    // the warm-ups run on one input derived for them, as the kit's runner does (never timed, kept or compared)
    if (o.warmup > 0) fresh.next(sets, &derived);
    for (int i = 0; i < o.warmup; ++i) {
        if (int rc = once(derived, 0, nullptr)) return rc;
    }
    std::vector<double> opTimes, totalTimes;
    std::vector<Taken> firstRun(sets.size());
    std::vector<int> checkedAt;
    std::vector<std::pair<Set, Taken>> checked;
    for (int i = 0; i < o.iterations; ++i) {
        opMs = 0.0;
        opCounts.clear();
        double total = 0.0;
        const bool onSet = static_cast<size_t>(i) < sets.size();
        if (!onSet) fresh.next(sets, &derived);
        if (int rc = once(onSet ? sets[i] : derived, i + 1, &total)) return rc;
        totalTimes.push_back(total);
        opTimes.push_back(opMs);
        for (const auto& name : o.outputs) {
            if (holdsPoison(net->getTensor(name))) {
                return fail("output '" + name + "' of timed run " + std::to_string(i + 1) + " still holds the "
                            "runner's poison where the run should have written it: a run did not do its work", 6);
            }
        }
        if (onSet) {
            firstRun[i] = take(o, net.get());
        } else if (picker.pick()) {
            checkedAt.push_back(i + 1);
            checked.emplace_back(derived, take(o, net.get()));
        }
    }
    const double phaseMs = nowMs() - phaseStart;
    // No code of the candidate's may run after the results are written: none runs in this thread any more, no
    // thread of it exists (counted here), signals are blocked on this thread and runMain's caller leaves by
    // exit_group at once (no destructor or atexit handler).  Left: a process the candidate forked (processes
    // are not counted; the sandbox's PID namespace ends it with the runner, but it may act before).
    if (liveThreadCount(ownThreads) != ownThreads) return fail("a thread was left running after the timed runs", 5);
    {
        std::string other = otherProcess(own);
        if (!other.empty()) return fail(other + " exists after the timed runs, besides the runner", 7);
    }
    {
        unsigned long all = ~0ul;
        rawSyscall(SYS_rt_sigprocmask, SIG_BLOCK, reinterpret_cast<long>(&all), 0, sizeof all);
    }
    for (size_t k = 0; k < sets.size(); ++k) {
        if (!writeOutputs(o, firstRun[k], sets[k].outDir, &err)) return fail(err);
    }
    if (!checked.empty()) makeDir(o.outDir + "/checked");
    for (size_t j = 0; j < checked.size(); ++j) {
        const std::string dir = o.outDir + "/checked/" + std::to_string(j);
        makeDir(dir);
        Taken in;
        std::vector<std::string> names;
        for (const auto& x : checked[j].first.inputs) {
            const Tensor* t = net->getTensor(x.name);
            names.push_back(x.name);
            in.bytes.push_back(x.bytes);
            in.manifest += x.name + " " + dataTypeName(t->type()) + " " + std::to_string(x.dims.size());
            for (int d : x.dims) in.manifest += " " + std::to_string(d);
            in.manifest += "\n";
        }
        if (!writeTensors(names, in, dir + "/in", &err) || !writeOutputs(o, checked[j].second, dir + "/out", &err)) {
            return fail(err);
        }
    }
    // timing.json last, with the clock at the end of the writes (written_ms: the kit's clock check uses it)
    std::string json = "{\"op_ms\": " + jsonList(opTimes) + ", \"total_ms\": " + jsonList(totalTimes) +
                       ", \"op_types\": {";
    bool first = true;
    for (const auto& kv : opCounts) {
        json += (first ? "\"" : ", \"") + kv.first + "\": " + std::to_string(kv.second);
        first = false;
    }
    std::string picks;
    for (size_t j = 0; j < checkedAt.size(); ++j) picks += (j ? ", " : "") + std::to_string(checkedAt[j]);
    char phase[96];
    std::snprintf(phase, sizeof phase, "}, \"phase_ms\": %.6f, \"written_ms\": %.6f, \"checked\": [", phaseMs,
                  nowMs() - phaseStart);
    json += phase + picks + "]}\n";
    if (!writeFile(o.outDir + "/timing.json", json.data(), json.size())) {
        return fail("cannot write " + o.outDir + "/timing.json");
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) { leave(runMain(argc, argv)); }
