// mkb_runner for the fixture engine: the kit's runner protocol.
//
//   mkb_runner <model_file> <in_dir> <out_dir> --outputs y[,z] [--threads N] [--precision high|normal|low]
//              [--warmup W] [--iterations N] [--op-types A,B|*] [--wait-go 0|1]
//
// in_dir/manifest.txt: one line per input "name dtype ndim d0 d1 ..." (dtype float32|int32); data in
// in_dir/<name>.bin (raw little-endian, C order).  --iterations 0 (default): run once.  N > 0: W warm-up
// runs, then N timed runs (inputs re-copied before each run) and out_dir/timing.json with
// {"op_ms": [N values], "total_ms": [N values], "op_types": {"<type>": count per run}} where op_ms is the
// summed wall time (ms) of executed ops whose type is in --op-types ("*" = all) and total_ms the whole
// forward.  Outputs always go to out_dir/<name>.bin plus out_dir/manifest.txt (same line format).
// --wait-go 1: after loading, print "mkb_runner: ready" on stdout and wait for the line "go" on stdin.
// Exit status: 0 success, 2 bad command line, 3 load or run error or no "go" (message on stderr).
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/Net.hpp"

using namespace MNN;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
    std::string model, inDir, outDir;
    std::vector<std::string> outputs;
    std::set<std::string> opTypes;  // empty = all
    int threads = 1, warmup = 1, iterations = 0, waitGo = 0;
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
                 "[--precision high|normal|low] [--warmup W] [--iterations N] [--op-types A,B|*] [--wait-go 0|1]\n",
                 why);
    return 2;
}

int fail(const std::string& why) {
    std::fprintf(stderr, "mkb_runner: %s\n", why.c_str());
    return 3;
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
};

bool readInputs(const std::string& dir, Net* net, std::vector<InputData>* data, std::string* err) {
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
            if (!(in >> d) || d <= 0) {
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
        if (type != t->type() || dims != t->shape()) {
            *err = where + "input '" + name + "' does not match the model's declared type/shape";
            return false;
        }
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
        data->push_back({name, std::move(bytes)});
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

bool writeOutputs(const Options& o, Net* net, std::string* err) {
    mkdir(o.outDir.c_str(), 0755);
    std::string manifest;
    for (const auto& name : o.outputs) {
        const Tensor* t = net->getTensor(name);
        std::string path = o.outDir + "/" + name + ".bin";
        FILE* f = std::fopen(path.c_str(), "wb");
        if (f == nullptr || std::fwrite(t->host<char>(), 1, t->size(), f) != t->size() || std::fclose(f) != 0) {
            *err = "cannot write " + path;
            return false;
        }
        manifest += name + " " + dataTypeName(t->type()) + " " + std::to_string(t->dimensions());
        for (int d : t->shape()) manifest += " " + std::to_string(d);
        manifest += "\n";
    }
    std::ofstream m(o.outDir + "/manifest.txt");
    m << manifest;
    if (!m.good()) {
        *err = "cannot write " + o.outDir + "/manifest.txt";
        return false;
    }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
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
    std::vector<InputData> inputs;
    if (!readInputs(o.inDir, net.get(), &inputs, &err)) return fail(err);
    if (!net->prepare(o.threads, o.precision, &err)) return fail("cannot prepare model: " + err);
    if (o.waitGo) {  // loaded and prepared: wait for the go of the timing phase
        std::printf("mkb_runner: ready\n");
        std::fflush(stdout);
        char line[16] = {0};
        if (std::fgets(line, sizeof line, stdin) == nullptr || std::strncmp(line, "go", 2) != 0) {
            return fail("no \"go\" on stdin after \"ready\"");
        }
    }

    auto copyInputs = [&]() {
        for (const auto& in : inputs) std::memcpy(net->getTensor(in.name)->host<char>(), in.bytes.data(), in.bytes.size());
    };
    Clock::time_point opStart;
    double opMs = 0.0;
    std::map<std::string, int> opCounts;
    Net::OpCallback before = [&](const Op&) { opStart = Clock::now(); };
    Net::OpCallback after = [&](const Op& op) {
        double ms = std::chrono::duration<double, std::milli>(Clock::now() - opStart).count();
        const char* type = opTypeName(op.type);
        opCounts[type] += 1;
        if (o.opTypes.empty() || o.opTypes.count(type)) opMs += ms;
    };

    if (o.iterations == 0) {
        copyInputs();
        if (!net->run(nullptr, nullptr, &err)) return fail("run failed: " + err);
        return writeOutputs(o, net.get(), &err) ? 0 : fail(err);
    }
    for (int i = 0; i < o.warmup; ++i) {
        copyInputs();
        if (!net->run(nullptr, nullptr, &err)) return fail("warm-up run failed: " + err);
    }
    std::vector<double> opTimes, totalTimes;
    for (int i = 0; i < o.iterations; ++i) {
        copyInputs();
        opMs = 0.0;
        opCounts.clear();
        Clock::time_point start = Clock::now();
        if (!net->run(before, after, &err)) return fail("timed run failed: " + err);
        totalTimes.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
        opTimes.push_back(opMs);
    }
    if (!writeOutputs(o, net.get(), &err)) return fail(err);
    std::string json = "{\"op_ms\": [";
    char buf[64];
    for (size_t i = 0; i < opTimes.size(); ++i) {
        std::snprintf(buf, sizeof buf, "%s%.6f", i ? ", " : "", opTimes[i]);
        json += buf;
    }
    json += "], \"total_ms\": [";
    for (size_t i = 0; i < totalTimes.size(); ++i) {
        std::snprintf(buf, sizeof buf, "%s%.6f", i ? ", " : "", totalTimes[i]);
        json += buf;
    }
    json += "], \"op_types\": {";
    bool first = true;
    for (const auto& kv : opCounts) {
        json += (first ? "\"" : ", \"") + kv.first + "\": " + std::to_string(kv.second);
        first = false;
    }
    json += "}}\n";
    std::ofstream t(o.outDir + "/timing.json");
    t << json;
    if (!t.good()) return fail("cannot write " + o.outDir + "/timing.json");
    return 0;
}
