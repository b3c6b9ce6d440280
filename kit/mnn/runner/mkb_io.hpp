// mkb_io.hpp: the command line, the tensor directories and the JSON of mkb_runner (mkb_runner.cpp).
//
// Written for the MobileKernelBench kit; standard library only (nothing of MNN), so what the runner reads and
// writes is apart from how it runs a model.  Included by mkb_runner.cpp only (one translation unit).

#pragma once

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace mkb {


struct Failure {
    std::string message;
};

[[noreturn]] void fail(const std::string& message) { throw Failure{message}; }

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
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot open " + path);
    std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t expected = s.count() * 4;
    if (data.size() != expected) {
        fail(path + ": " + std::to_string(data.size()) + " bytes, manifest says " + std::to_string(expected));
    }
    return data;
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

}  // namespace mkb
