// mkb_io.hpp: the command line, the tensor directories (input sets, outputs) and the JSON of mkb_runner
// (mkb_runner.cpp).
//
// Written for the MobileKernelBench kit; standard library only (nothing of MNN), so what the runner reads and
// writes is apart from how it runs a model.  Included by mkb_runner.cpp only (one translation unit).

#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace mkb {


// exit statuses (the protocol: kit/mnn/runner.py)
constexpr int kExitUsage = 2;
constexpr int kExitError = 3;
constexpr int kExitInputModified = 4;
constexpr int kExitThreadsLeft = 5;
constexpr int kExitTimedOutputChanged = 6;
constexpr int kExitProcessLeft = 7;

struct Failure {
    std::string message;
    int code = kExitError;
};

[[noreturn]] void fail(const std::string& message, int code = kExitError) { throw Failure{message, code}; }

struct TensorSpec {
    std::string name;
    std::string dtype;  // "float32" | "int32"
    std::vector<int> dims;
    size_t count() const {
        size_t n = 1;
        for (int d : dims) n *= static_cast<size_t>(d);
        return n;
    }
};

struct Options {
    std::string model;
    std::string inDir;
    std::string outDir;
    std::vector<std::string> outputs;
    int threads = 1;
    std::string precision = "high";
    int warmup = 0;
    int iterations = 0;
    bool allOps = true;
    std::set<std::string> opTypes;
    bool waitGo = false;
    int extraThreads = 0;  // threads of the process that are not the program's (an emulator's own)
    int checked = 0;       // timed forwards with derived inputs written out for the kit (mkb_fresh.hpp)
    bool pidNamespace = false;  // --pid-ns 1: in the sandbox's PID namespace, /proc is listed (mkb_guard.hpp)
};

std::vector<std::string> splitList(const std::string& text) {
    std::vector<std::string> items;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (!item.empty()) items.push_back(item);
    }
    return items;
}

int parseCount(const std::string& flag, const std::string& value, int minimum) {
    char* end = nullptr;
    long v = std::strtol(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || v < minimum || v > 1000000) {
        throw Failure{"bad value for " + flag + ": '" + value + "'"};
    }
    return static_cast<int>(v);
}

Options parseArgs(int argc, char** argv) {
    Options o;
    std::vector<std::string> positional;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg.rfind("--", 0) == 0) {
            if (i + 1 >= argc) throw Failure{"missing value for " + arg};
            std::string value = argv[++i];
            if (arg == "--outputs") {
                o.outputs = splitList(value);
            } else if (arg == "--threads") {
                o.threads = parseCount(arg, value, 1);
            } else if (arg == "--precision") {
                if (value != "high" && value != "normal" && value != "low") {
                    throw Failure{"bad value for --precision: '" + value + "' (high|normal|low)"};
                }
                o.precision = value;
            } else if (arg == "--warmup") {
                o.warmup = parseCount(arg, value, 0);
            } else if (arg == "--iterations") {
                o.iterations = parseCount(arg, value, 0);
            } else if (arg == "--wait-go") {
                o.waitGo = parseCount(arg, value, 0) != 0;
            } else if (arg == "--extra-threads") {
                o.extraThreads = parseCount(arg, value, 0);
            } else if (arg == "--checked") {
                o.checked = parseCount(arg, value, 0);
            } else if (arg == "--pid-ns") {
                o.pidNamespace = parseCount(arg, value, 0) != 0;
            } else if (arg == "--op-types") {
                auto types = splitList(value);
                o.allOps = false;
                for (auto& t : types) {
                    if (t == "*") o.allOps = true;
                    o.opTypes.insert(t);
                }
                if (types.empty()) throw Failure{"--op-types is empty"};
            } else {
                throw Failure{"unknown option " + arg};
            }
        } else {
            positional.push_back(arg);
        }
    }
    if (positional.size() != 3) throw Failure{"expected <model_file> <in_dir> <out_dir>"};
    if (o.outputs.empty()) throw Failure{"--outputs is required"};
    o.model = positional[0];
    o.inDir = positional[1];
    o.outDir = positional[2];
    return o;
}

// ---- manifest + raw tensors ----

std::vector<TensorSpec> readManifest(const std::string& dir) {
    const std::string path = dir + "/manifest.txt";
    std::ifstream in(path);
    if (!in) fail("cannot open " + path);
    std::vector<TensorSpec> specs;
    std::string line;
    int lineNo = 0;
    while (std::getline(in, line)) {
        ++lineNo;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        std::istringstream ls(line);
        TensorSpec s;
        int ndim = -1;
        std::string where = path + ":" + std::to_string(lineNo);
        if (!(ls >> s.name >> s.dtype >> ndim) || ndim < 0) fail(where + ": expected 'name dtype ndim dims...'");
        if (s.dtype != "float32" && s.dtype != "int32") fail(where + ": dtype must be float32 or int32");
        for (int i = 0; i < ndim; ++i) {
            long d = -1;
            if (!(ls >> d) || d < 0) fail(where + ": expected " + std::to_string(ndim) + " non-negative dims");
            s.dims.push_back(static_cast<int>(d));
        }
        std::string extra;
        if (ls >> extra) fail(where + ": trailing text '" + extra + "'");
        specs.push_back(s);
    }
    if (specs.empty()) fail(path + ": no inputs listed");
    return specs;
}

std::vector<char> readBlob(const std::string& dir, const TensorSpec& s) {
    const std::string path = dir + "/" + s.name + ".bin";
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) fail("cannot open " + path);
    // one read of the whole file (a character at a time through istreambuf_iterator took 9 ms of a run's 133
    // for two 4 MB sets)
    const std::streamoff size = in.tellg();
    const size_t expected = s.count() * 4;
    if (size < 0 || static_cast<size_t>(size) != expected) {
        fail(path + ": " + std::to_string(size) + " bytes, manifest says " + std::to_string(expected));
    }
    std::vector<char> data(expected);
    in.seekg(0);
    if (expected > 0 && !in.read(data.data(), static_cast<std::streamsize>(expected))) fail("cannot read " + path);
    return data;
}

// One input set: its tensors (in manifest order), their bytes, and where its outputs go.
struct InputSet {
    std::vector<TensorSpec> specs;
    std::vector<std::vector<char>> blobs;
    std::string outDir;
};

bool isDir(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool isFile(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The input sets of in_dir: in_dir itself when it holds a manifest (outputs to out_dir), else in_dir/0,
// in_dir/1, ... up to the first number without a manifest (outputs of set k to out_dir/k, created).  Every
// set must list the same tensors (names, dtypes, shapes) as the first.
std::vector<InputSet> readSets(const std::string& inDir, const std::string& outDir) {
    std::vector<std::pair<std::string, std::string>> dirs;
    if (isFile(inDir + "/manifest.txt")) {
        dirs.emplace_back(inDir, outDir);
    } else {
        for (int k = 0; isFile(inDir + "/" + std::to_string(k) + "/manifest.txt"); ++k) {
            dirs.emplace_back(inDir + "/" + std::to_string(k), outDir + "/" + std::to_string(k));
        }
    }
    if (dirs.empty()) fail("no " + inDir + "/manifest.txt nor " + inDir + "/0/manifest.txt");
    std::vector<InputSet> sets;
    for (const auto& d : dirs) {
        InputSet set;
        set.specs = readManifest(d.first);
        for (const auto& s : set.specs) set.blobs.push_back(readBlob(d.first, s));
        set.outDir = d.second;
        if (!sets.empty()) {
            const auto& first = sets[0].specs;
            bool same = first.size() == set.specs.size();
            for (size_t i = 0; same && i < first.size(); ++i) {
                same = first[i].name == set.specs[i].name && first[i].dtype == set.specs[i].dtype &&
                       first[i].dims == set.specs[i].dims;
            }
            if (!same) fail(d.first + "/manifest.txt lists other tensors than " + dirs[0].first + "/manifest.txt");
        }
        if (d.second != outDir && ::mkdir(d.second.c_str(), 0755) != 0 && !isDir(d.second)) {
            fail("cannot create " + d.second);
        }
        sets.push_back(std::move(set));
    }
    return sets;
}

std::string jsonString(const std::string& s) {
    std::string r = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') {
            r += '\\';
            r += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\u%04x", c);
            r += buf;
        } else {
            r += c;
        }
    }
    return r + "\"";
}

std::string jsonNumbers(const std::vector<double>& values) {
    std::string r = "[";
    for (size_t i = 0; i < values.size(); ++i) {
        char buf[40];
        std::snprintf(buf, sizeof(buf), "%.9g", values[i]);
        r += (i ? ", " : "") + std::string(buf);
    }
    return r + "]";
}

// One output, taken as host bytes right after its forward: its manifest line and its data.
struct Taken {
    std::string manifestLine;
    std::vector<char> bytes;
};

// The output folder, opened once before the runner locks itself down (mkb_lockdown.hpp): every file and folder
// it makes there afterwards is made through this descriptor (openat, mkdirat), the one way the seccomp filter
// leaves to create a file.
struct OutFolder {
    std::string path;
    int fd = -1;
};

inline OutFolder& outFolder() {
    static OutFolder folder;
    return folder;
}

void openOutFolder(const std::string& path) {
    outFolder().path = path;
    outFolder().fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (outFolder().fd < 0) fail("cannot open the output folder " + path);
}

// `path` relative to the output folder's descriptor when it lies below the folder (dirfd and the rest), else
// AT_FDCWD and the path itself.
std::pair<int, std::string> underOut(const std::string& path) {
    const auto& out = outFolder();
    if (out.fd >= 0 && path.size() > out.path.size() + 1 && path.compare(0, out.path.size(), out.path) == 0 &&
        path[out.path.size()] == '/') {
        return {out.fd, path.substr(out.path.size() + 1)};
    }
    return {AT_FDCWD, path};
}

// Write `size` bytes to a new file at path (replaced if it exists), closed before it
// returns (the runner leaves without running destructors).  Not fsync'ed: the kit reads the file on this host
// after the runner's exit, from the page cache; a crash of the host loses the job either way, and an fsync would
// add disk latency to the gap the kit's clock check allows.
void writeBytes(const std::string& path, const char* data, size_t size) {
    const auto at = underOut(path);
    int fd = ::openat(at.first, at.second.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) fail("cannot write " + path);
    for (size_t done = 0; done < size;) {
        ssize_t n = ::write(fd, data + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            ::close(fd);
            fail("cannot write " + path);
        }
        done += static_cast<size_t>(n);
    }
    if (::close(fd) != 0) fail("cannot write " + path);
}

void writeText(const std::string& path, const std::string& text) { writeBytes(path, text.data(), text.size()); }

// Make the folder dir (nothing if it is one already).
void makeDir(const std::string& dir) {
    if (dir == outFolder().path) return;  // made (and opened) before the lockdown
    const auto at = underOut(dir);
    if (::mkdirat(at.first, at.second.c_str(), 0755) != 0 && !isDir(dir)) fail("cannot create " + dir);
}

// Write the tensors `taken` named `names` (in that order) and their manifest into dir (created if missing).
void writeTaken(const std::vector<Taken>& taken, const std::vector<std::string>& names, const std::string& dir) {
    makeDir(dir);
    std::string manifest;
    for (size_t i = 0; i < taken.size(); ++i) {
        writeBytes(dir + "/" + names[i] + ".bin", taken[i].bytes.data(), taken[i].bytes.size());
        manifest += taken[i].manifestLine;
    }
    writeText(dir + "/manifest.txt", manifest);
}

// Write the outputs named by --outputs (taken, in that order) and their manifest into dir.
void writeOutputs(const std::vector<Taken>& taken, const Options& o, const std::string& dir) {
    writeTaken(taken, o.outputs, dir);
}

std::string timingJson(const std::vector<double>& opMs, const std::vector<double>& totalMs,
                       const std::map<std::string, int>& counts, double phaseMs, const std::vector<int>& checked,
                       double writtenMs) {
    std::string json = "{\"op_ms\": " + jsonNumbers(opMs) + ", \"total_ms\": " + jsonNumbers(totalMs) +
                       ", \"op_types\": {";
    bool first = true;
    for (const auto& kv : counts) {
        json += (first ? "" : ", ") + jsonString(kv.first) + ": " + std::to_string(kv.second);
        first = false;
    }
    char phase[40];
    std::snprintf(phase, sizeof phase, "%.9g", phaseMs);
    std::string picks;
    for (size_t i = 0; i < checked.size(); ++i) picks += (i ? ", " : "") + std::to_string(checked[i]);
    char written[40];
    std::snprintf(written, sizeof written, "%.9g", writtenMs);
    return json + "}, \"phase_ms\": " + phase + ", \"written_ms\": " + written + ", \"checked\": [" + picks + "]}\n";
}

}  // namespace mkb
