// mkb_runner: run one converted MNN model on raw binary tensors, with per-op timings.
//
// Written for the MobileKernelBench kit against MNN's public headers only (Module API, Executor callbacks).
//
//   mkb_runner <model_file> <in_dir> <out_dir> --outputs y[,z] [--threads N] [--precision high|normal|low]
//              [--warmup W] [--iterations N] [--op-types A,B|*] [--wait-go 0|1]
//
// in_dir/manifest.txt holds one line per input, "name dtype ndim d0 d1 ..." (dtype float32 | int32); the data of
// each input is in in_dir/<name>.bin, raw little-endian, C order.  Every output named by --outputs is written to
// out_dir/<name>.bin with out_dir/manifest.txt in the same format.  With --iterations N > 0 the runner also does
// W warm-up runs and N timed runs and writes out_dir/timing.json:
//   {"op_ms": [...N], "total_ms": [...N], "op_types": {"Type": count per run, ...}}
// op_ms sums the wall time of every executed op whose type is in --op-types ("*" = all ops); total_ms is the
// whole forward.  With --wait-go 1 the runner loads the model and reads the inputs, then prints the line
// "mkb_runner: ready" on stdout and waits for the line "go" on stdin before it runs (a timing phase then holds
// the CPU for the runs alone).  Exit status: 0 success, 2 usage error, 3 load/shape/run/IO error or no "go"
// (message on stderr).

#include "mkb_io.hpp"

#include <MNN/Interpreter.hpp>
#include <MNN/MNNForwardType.h>
#include <MNN/Tensor.hpp>
#include <MNN/expr/Executor.hpp>
#include <MNN/expr/ExecutorScope.hpp>
#include <MNN/expr/Expr.hpp>
#include <MNN/expr/MathOp.hpp>
#include <MNN/expr/Module.hpp>
#include <MNN/expr/NeuralNetWorkOp.hpp>

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

namespace {

using namespace mkb;

using MNN::Express::VARP;
using Clock = std::chrono::steady_clock;

constexpr int kExitUsage = 2;
constexpr int kExitError = 3;

// ---- op timing through the executor's callbacks ----

struct OpClock {
    bool active = false;
    Clock::time_point start;
    double selectedMs = 0.0;
    std::map<std::string, int> counts;

    void reset() {
        selectedMs = 0.0;
        counts.clear();
    }
};

// ---- model ----

MNN::BackendConfig::PrecisionMode precisionMode(const std::string& p) {
    if (p == "high") return MNN::BackendConfig::Precision_High;
    if (p == "low") return MNN::BackendConfig::Precision_Low;
    return MNN::BackendConfig::Precision_Normal;
}

halide_type_t halideType(const std::string& dtype) {
    return dtype == "int32" ? halide_type_of<int32_t>() : halide_type_of<float>();
}

struct Feed {
    std::vector<VARP> raw;   // the host tensors we fill before every run
    std::vector<VARP> feed;  // what onForward receives (raw, or raw converted to NC4HW4)
};

Feed makeFeed(const std::vector<TensorSpec>& specs, const MNN::Express::Module::Info* info) {
    using namespace MNN::Express;
    Feed f;
    for (size_t i = 0; i < specs.size(); ++i) {
        const auto& s = specs[i];
        const auto& want = info->inputs[i];
        const bool wantFloat = want.type.code == halide_type_float;
        const bool haveFloat = s.dtype == "float32";
        if (wantFloat != haveFloat) {
            fail("input '" + s.name + "' is " + s.dtype + " but the model expects " +
                 (wantFloat ? "a float tensor" : "an integer tensor"));
        }
        Dimensionformat order = want.order == NC4HW4 ? NCHW : want.order;
        VARP raw = _Input(s.dims, order, halideType(s.dtype));
        raw->setName(s.name);
        f.raw.push_back(raw);
        f.feed.push_back(want.order == NC4HW4 ? _Convert(raw, NC4HW4) : raw);
    }
    return f;
}

void fillInputs(Feed& f, const std::vector<TensorSpec>& specs, const std::vector<std::vector<char>>& blobs) {
    for (size_t i = 0; i < specs.size(); ++i) {
        void* dst = f.raw[i]->writeMap<void>();
        if (blobs[i].empty()) continue;
        if (dst == nullptr) fail("cannot map input '" + specs[i].name + "' for writing");
        std::memcpy(dst, blobs[i].data(), blobs[i].size());
    }
}

std::vector<VARP> forward(MNN::Express::Module& net, const Feed& f, size_t nOutputs) {
    auto outs = net.onForward(f.feed);
    if (outs.size() != nOutputs) fail("forward failed (the model returned " + std::to_string(outs.size()) +
                                      " outputs, expected " + std::to_string(nOutputs) + ")");
    for (size_t i = 0; i < outs.size(); ++i) {
        if (outs[i].get() == nullptr || outs[i]->getInfo() == nullptr) {
            fail("forward failed: output " + std::to_string(i) + " has no shape");
        }
        if (outs[i]->getInfo()->size > 0 && outs[i]->readMap<void>() == nullptr) {
            fail("forward failed: output " + std::to_string(i) + " cannot be read");
        }
    }
    return outs;
}

void writeOutputs(const std::vector<VARP>& outs, const Options& o, MNN::Express::Dimensionformat defaultFormat) {
    using namespace MNN::Express;
    std::ostringstream manifest;
    for (size_t i = 0; i < outs.size(); ++i) {
        VARP v = outs[i];
        const auto& name = o.outputs[i];
        if (v->getInfo()->order == NC4HW4) v = _Convert(v, defaultFormat == NC4HW4 ? NCHW : defaultFormat);
        auto type = v->getInfo()->type;
        std::string dtype;
        if (type.code == halide_type_float) {
            if (type.bits != 32) v = _Cast<float>(v);
            dtype = "float32";
        } else {
            if (!(type.code == halide_type_int && type.bits == 32)) v = _Cast<int32_t>(v);
            dtype = "int32";
        }
        const auto* info = v->getInfo();
        if (info == nullptr) fail("cannot convert output '" + name + "'");
        manifest << name << " " << dtype << " " << info->dim.size();
        for (int d : info->dim) manifest << " " << d;
        manifest << "\n";
        const std::string path = o.outDir + "/" + name + ".bin";
        std::ofstream out(path, std::ios::binary);
        if (!out) fail("cannot write " + path);
        if (info->size > 0) {
            const char* ptr = v->readMap<char>();
            if (ptr == nullptr) fail("cannot read output '" + name + "'");
            out.write(ptr, static_cast<std::streamsize>(info->size * 4));
        }
        if (!out) fail("cannot write " + path);
    }
    const std::string path = o.outDir + "/manifest.txt";
    std::ofstream out(path);
    out << manifest.str();
    if (!out) fail("cannot write " + path);
}

int run(const Options& o) {
    using namespace MNN::Express;
    const auto specs = readManifest(o.inDir);
    std::vector<std::vector<char>> blobs;
    for (const auto& s : specs) blobs.push_back(readBlob(o.inDir, s));

    MNN::BackendConfig backendConfig;
    backendConfig.precision = precisionMode(o.precision);
    auto executor = Executor::newExecutor(MNN_FORWARD_CPU, backendConfig, o.threads);
    ExecutorScope scope(executor);

    MNN::ScheduleConfig schedule;
    schedule.type = MNN_FORWARD_CPU;
    schedule.backupType = MNN_FORWARD_CPU;
    schedule.numThread = o.threads;
    schedule.backendConfig = &backendConfig;
    std::shared_ptr<Executor::RuntimeManager> rtmgr(Executor::RuntimeManager::createRuntimeManager(schedule),
                                                    Executor::RuntimeManager::destroy);
    if (!rtmgr) fail("cannot create the CPU runtime");
    // Session_Debug makes the sessions run the executor's before/after callbacks around every op.
    rtmgr->setMode(MNN::Interpreter::Session_Debug);

    std::vector<std::string> inputNames;
    for (const auto& s : specs) inputNames.push_back(s.name);
    Module::Config config;
    config.shapeMutable = true;
    std::shared_ptr<Module> net(Module::load(inputNames, o.outputs, o.model.c_str(), rtmgr, &config),
                                Module::destroy);
    if (!net) fail("cannot load model " + o.model + " with inputs/outputs as given");
    const auto* info = net->getInfo();
    if (info == nullptr || info->inputs.size() != specs.size()) {
        fail("the model has " + std::to_string(info ? info->inputs.size() : 0) + " inputs, manifest lists " +
             std::to_string(specs.size()));
    }

    OpClock clock;
    executor->setCallBack(
        [&clock](const std::vector<MNN::Tensor*>&, const MNN::OperatorInfo* op) {
            if (clock.active) {
                clock.counts[op->type()] += 1;
                clock.start = Clock::now();
            }
            return true;
        },
        [&clock, &o](const std::vector<MNN::Tensor*>&, const MNN::OperatorInfo* op) {
            if (clock.active) {
                auto end = Clock::now();
                if (o.allOps || o.opTypes.count(op->type())) {
                    clock.selectedMs += std::chrono::duration<double, std::milli>(end - clock.start).count();
                }
            }
            return true;
        });

    Feed feed = makeFeed(specs, info);
    if (o.waitGo) {
        std::printf("mkb_runner: ready\n");
        std::fflush(stdout);
        char line[16] = {0};
        if (std::fgets(line, sizeof line, stdin) == nullptr || std::strncmp(line, "go", 2) != 0) {
            fail("no \"go\" on stdin after \"ready\"");
        }
    }
    std::vector<VARP> outs;
    if (o.iterations == 0) {
        fillInputs(feed, specs, blobs);
        outs = forward(*net, feed, o.outputs.size());
    } else {
        for (int i = 0; i < o.warmup; ++i) {
            fillInputs(feed, specs, blobs);
            outs = forward(*net, feed, o.outputs.size());
        }
        std::vector<double> opMs, totalMs;
        std::map<std::string, int> counts;
        for (int i = 0; i < o.iterations; ++i) {
            fillInputs(feed, specs, blobs);
            outs.clear();
            clock.reset();
            clock.active = true;
            auto t0 = Clock::now();
            outs = forward(*net, feed, o.outputs.size());
            auto t1 = Clock::now();
            clock.active = false;
            opMs.push_back(clock.selectedMs);
            totalMs.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
            counts = clock.counts;  // inputs are identical every run, so is the op list
        }
        std::string json = "{\"op_ms\": " + jsonNumbers(opMs) + ", \"total_ms\": " + jsonNumbers(totalMs) +
                           ", \"op_types\": {";
        bool first = true;
        for (const auto& kv : counts) {
            json += (first ? "" : ", ") + jsonString(kv.first) + ": " + std::to_string(kv.second);
            first = false;
        }
        json += "}}\n";
        const std::string path = o.outDir + "/timing.json";
        std::ofstream out(path);
        out << json;
        if (!out) fail("cannot write " + path);
    }
    writeOutputs(outs, o, info->defaultFormat);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options opts;
    try {
        opts = parseArgs(argc, argv);
    } catch (const Failure& f) {
        std::fprintf(stderr, "mkb_runner: %s\nusage: mkb_runner <model_file> <in_dir> <out_dir> --outputs y[,z] "
                             "[--threads N] [--precision high|normal|low] [--warmup W] [--iterations N] "
                             "[--op-types A,B|*] [--wait-go 0|1]\n",
                     f.message.c_str());
        return kExitUsage;
    }
    try {
        return run(opts);
    } catch (const Failure& f) {
        std::fprintf(stderr, "mkb_runner: error: %s\n", f.message.c_str());
        return kExitError;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mkb_runner: error: %s\n", e.what());
        return kExitError;
    }
}
