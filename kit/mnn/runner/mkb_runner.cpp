// mkb_runner: run one converted MNN model on raw binary tensors, with per-op timings.
//
// Written for the MobileKernelBench kit against MNN's public headers only (Module API, Executor callbacks).
//
//   mkb_runner <model_file> <in_dir> <out_dir> --outputs y[,z] [--threads N] [--precision high|normal|low]
//              [--warmup W] [--iterations N] [--op-types A,B|*] [--wait-go 0|1] [--extra-threads E]
//
// An input set is a directory whose manifest.txt holds one line per input, "name dtype ndim d0 d1 ..." (dtype
// float32 | int32), with the data of each input in <name>.bin, raw little-endian, C order.  in_dir is one set
// (in_dir/manifest.txt; outputs go to out_dir) or several: in_dir/0/, in_dir/1/, ... (outputs of set k go to
// out_dir/k/); every set lists the same tensors.  Outputs named by --outputs are written as <name>.bin with a
// manifest.txt in the same format.
//
// --iterations 0: one forward per set, in order, each set's outputs written.  --iterations N > 0: W warm-up and
// then N timed forwards, forward i on set i % S (S sets; N >= S); every timed forward's outputs must be
// byte-identical to those of the first timed forward on the same set (checked after each, outside its timing),
// whose outputs are written, and out_dir/timing.json:
//   {"op_ms": [...N], "total_ms": [...N], "op_types": {"Type": count per run, ...}, "phase_ms": P}
// op_ms sums the wall time of every executed op whose type is in --op-types ("*" = all ops); total_ms is the
// whole forward; phase_ms the wall time from reading "go" (without --wait-go: from the same point, before the
// first warm-up) to the end of the timed forwards.  Every time is read from CLOCK_MONOTONIC by the system call
// itself (mkb_guard.hpp), never through libc, whose functions the candidate's library could replace.
// With --wait-go 1 the runner loads the model and reads the inputs, then prints the line "mkb_runner: ready" on
// stdout and waits for the line "go" on stdin before it runs (a timing phase then holds the CPU for the runs).
//
// Checks around every forward: before it, the outputs' memory of the previous forward (which MNN's
// StaticModule reuses for the next one once the runner holds no reference) is filled with 0xFF bytes (NaN),
// so a kernel that skips its work leaves no stale result; after it, every input tensor must still hold the
// bytes the runner put there, and the process may have no more threads than MNN's own (the main thread and
// the thread pool's --threads - 1 workers, and --extra-threads E (default 0) that are not the program's (an
// emulator's own: qemu-user adds one); also checked before the first forward and before the results are
// written).  The runner leaves by the exit_group system call right after writing its results (and on every
// error): no destructor or atexit handler of the candidate's library runs after them.
//
// Exit status: 0 success; 2 usage error; 3 load/shape/run/IO error or no "go"; 4 a forward changed an input
// tensor; 5 more threads than MNN's own after a forward (or before the first); 6 a timed forward's outputs
// differ from those of the first timed forward on the same input set; the message is on stderr.

#include "mkb_guard.hpp"
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

// ---- op timing through the executor's callbacks ----

struct OpClock {
    bool active = false;
    double startMs = 0.0;
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

void fillInputs(Feed& f, const InputSet& set) {
    for (size_t i = 0; i < set.specs.size(); ++i) {
        void* dst = f.raw[i]->writeMap<void>();
        if (set.blobs[i].empty()) continue;
        if (dst == nullptr) fail("cannot map input '" + set.specs[i].name + "' for writing");
        std::memcpy(dst, set.blobs[i].data(), set.blobs[i].size());
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

// ---- outputs: taken as host bytes right after their forward (Taken), written at the end ----

// Output i as the host tensor the runner writes: NC4HW4 converted to the model's default layout, other types
// cast to float32 or int32 (*dtype gets which).
VARP hostView(VARP v, const std::string& name, MNN::Express::Dimensionformat defaultFormat, std::string* dtype) {
    using namespace MNN::Express;
    if (v->getInfo()->order == NC4HW4) v = _Convert(v, defaultFormat == NC4HW4 ? NCHW : defaultFormat);
    auto type = v->getInfo()->type;
    if (type.code == halide_type_float) {
        if (type.bits != 32) v = _Cast<float>(v);
        *dtype = "float32";
    } else {
        if (!(type.code == halide_type_int && type.bits == 32)) v = _Cast<int32_t>(v);
        *dtype = "int32";
    }
    if (v->getInfo() == nullptr) fail("cannot convert output '" + name + "'");
    return v;
}

std::vector<Taken> takeOutputs(const std::vector<VARP>& outs, const Options& o,
                               MNN::Express::Dimensionformat defaultFormat) {
    std::vector<Taken> taken;
    for (size_t i = 0; i < outs.size(); ++i) {
        const auto& name = o.outputs[i];
        std::string dtype;
        VARP v = hostView(outs[i], name, defaultFormat, &dtype);
        const auto* info = v->getInfo();
        Taken t;
        std::ostringstream line;
        line << name << " " << dtype << " " << info->dim.size();
        for (int d : info->dim) line << " " << d;
        t.manifestLine = line.str() + "\n";
        if (info->size > 0) {
            const char* ptr = v->readMap<char>();
            if (ptr == nullptr) fail("cannot read output '" + name + "'");
            t.bytes.assign(ptr, ptr + info->size * 4);
        }
        taken.push_back(std::move(t));
    }
    return taken;
}

// The name of the first output of `outs` whose bytes differ from `taken`'s (the same input set's first timed
// forward), or "" when all are the same: read in place, no copy (sameBytes, no libc).
std::string changedOutput(const std::vector<VARP>& outs, const std::vector<Taken>& taken, const Options& o,
                          MNN::Express::Dimensionformat defaultFormat) {
    for (size_t i = 0; i < outs.size(); ++i) {
        std::string dtype;
        VARP v = hostView(outs[i], o.outputs[i], defaultFormat, &dtype);
        const size_t bytes = static_cast<size_t>(v->getInfo()->size) * 4;
        if (bytes != taken[i].bytes.size()) return o.outputs[i];
        if (bytes == 0) continue;
        const char* ptr = v->readMap<char>();
        if (ptr == nullptr || !sameBytes(ptr, taken[i].bytes.data(), bytes)) return o.outputs[i];
    }
    return "";
}

// ---- the checks around every forward ----

struct Guard {
    int allowedThreads = 1;
    std::vector<std::pair<char*, size_t>> poison;  // output memory of the previous forward, to fill

    // MNN's own threads: the main thread and the pool's threads - 1 workers (created with the runtime, before
    // the first forward; measured on MNN 3.2.2 with 1, 2 and 4 threads: exactly `threads` before and after).
    explicit Guard(int threads) : allowedThreads(threads) {}

    void checkThreads(const std::string& when) const {
        int n = countThreads();
        if (n < 0) fail("cannot read the thread count from /proc/self/status");
        if (n > allowedThreads) {
            fail(std::to_string(n) + " threads " + when + ", MNN's own account for " +
                     std::to_string(allowedThreads) + ": the candidate left a thread running",
                 kExitThreadsLeft);
        }
    }

    void checkInputs(Feed& f, const InputSet& set, const std::string& when) const {
        for (size_t i = 0; i < set.specs.size(); ++i) {
            if (set.blobs[i].empty()) continue;
            const void* now = f.raw[i]->readMap<void>();
            if (now == nullptr || !sameBytes(now, set.blobs[i].data(), set.blobs[i].size())) {
                fail("input '" + set.specs[i].name + "' was modified " + when, kExitInputModified);
            }
        }
    }

    // Remember the memory of the outputs that an op of the last forward wrote (`written`, from the after-op
    // callback): a constant output, or an output that is an input, is never filled.
    void remember(const std::vector<VARP>& outs) {
        poison.clear();
        for (const auto& v : outs) {
            const auto* info = v->getInfo();
            char* p = const_cast<char*>(v->readMap<char>());
            size_t bytes = info->size * static_cast<size_t>(info->type.bytes());
            bool byOp = false;
            for (const char* w : written) byOp = byOp || w == p;
            if (p != nullptr && bytes > 0 && byOp) poison.emplace_back(p, bytes);
        }
    }

    // Called once the runner holds no reference to those outputs: MNN's StaticModule then keeps their memory
    // as the next forward's output (StaticModule::_resize allocates a new buffer only for an output still
    // referenced), so the next forward must write every byte of it.  (An NC4HW4 output is filled over its
    // logical size only: the packed buffer is at least that long.)
    void apply() const {
        for (const auto& pb : poison) poisonBytes(pb.first, pb.second);
    }

    bool recording = false;            // inside a forward: the after-op callback fills `written`
    std::vector<const char*> written;  // host memory of every op output of the last forward (its capacity
                                       // stays: no allocation inside a timed forward after the first)
};

struct Model {
    std::shared_ptr<MNN::Express::Executor> executor;
    std::shared_ptr<MNN::Express::Executor::RuntimeManager> rtmgr;
    std::shared_ptr<MNN::Express::Module> net;
};

Model loadModel(const Options& o, const std::vector<TensorSpec>& specs, MNN::BackendConfig& backendConfig) {
    using namespace MNN::Express;
    Model m;
    backendConfig.precision = precisionMode(o.precision);
    m.executor = Executor::newExecutor(MNN_FORWARD_CPU, backendConfig, o.threads);
    MNN::ScheduleConfig schedule;
    schedule.type = MNN_FORWARD_CPU;
    schedule.backupType = MNN_FORWARD_CPU;
    schedule.numThread = o.threads;
    schedule.backendConfig = &backendConfig;
    ExecutorScope scope(m.executor);
    m.rtmgr.reset(Executor::RuntimeManager::createRuntimeManager(schedule), Executor::RuntimeManager::destroy);
    if (!m.rtmgr) fail("cannot create the CPU runtime");
    // Session_Debug makes the sessions run the executor's before/after callbacks around every op.
    m.rtmgr->setMode(MNN::Interpreter::Session_Debug);
    std::vector<std::string> inputNames;
    for (const auto& s : specs) inputNames.push_back(s.name);
    Module::Config config;
    config.shapeMutable = true;
    m.net.reset(Module::load(inputNames, o.outputs, o.model.c_str(), m.rtmgr, &config), Module::destroy);
    if (!m.net) fail("cannot load model " + o.model + " with inputs/outputs as given");
    const auto* info = m.net->getInfo();
    if (info == nullptr || info->inputs.size() != specs.size()) {
        fail("the model has " + std::to_string(info ? info->inputs.size() : 0) + " inputs, manifest lists " +
             std::to_string(specs.size()));
    }
    return m;
}

void waitForGo() {
    std::printf("mkb_runner: ready\n");
    std::fflush(stdout);
    char line[16] = {0};
    if (std::fgets(line, sizeof line, stdin) == nullptr || std::strncmp(line, "go", 2) != 0) {
        fail("no \"go\" on stdin after \"ready\"");
    }
}

int run(const Options& o) {
    using namespace MNN::Express;
    ::mkdir(o.outDir.c_str(), 0755);  // the kit makes it; a caller that did not gets it here
    const auto sets = readSets(o.inDir, o.outDir);
    const size_t nSets = sets.size();
    if (o.iterations > 0 && static_cast<size_t>(o.iterations) < nSets) {
        fail("--iterations " + std::to_string(o.iterations) + " is fewer than the " + std::to_string(nSets) +
                 " input sets",
             kExitUsage);
    }
    MNN::BackendConfig backendConfig;
    Model m = loadModel(o, sets[0].specs, backendConfig);
    ExecutorScope scope(m.executor);
    const auto* info = m.net->getInfo();

    OpClock clock;
    Guard guard(o.threads + o.extraThreads);
    m.executor->setCallBack(
        [&clock](const std::vector<MNN::Tensor*>&, const MNN::OperatorInfo* op) {
            if (clock.active) {
                clock.counts[op->type()] += 1;
                clock.startMs = monotonicMs();
            }
            return true;
        },
        [&clock, &guard, &o](const std::vector<MNN::Tensor*>& outputs, const MNN::OperatorInfo* op) {
            if (clock.active) {
                double end = monotonicMs();
                if (o.allOps || o.opTypes.count(op->type())) clock.selectedMs += end - clock.startMs;
            }
            if (guard.recording) {
                for (const auto* t : outputs) {
                    if (t != nullptr && t->host<char>() != nullptr) guard.written.push_back(t->host<char>());
                }
            }
            return true;
        });

    Feed feed = makeFeed(sets[0].specs, info);
    guard.checkThreads("before the first forward");
    if (o.waitGo) waitForGo();
    const double phaseStart = monotonicMs();

    // one forward on set k: inputs filled and the last outputs poisoned before it, checked after it; *totalMs
    // gets the forward's own time
    int calls = 0;
    auto once = [&](size_t k, double* totalMs) {
        fillInputs(feed, sets[k]);
        guard.apply();
        guard.written.clear();
        guard.recording = true;
        double t0 = monotonicMs();
        std::vector<VARP> outs = forward(*m.net, feed, o.outputs.size());
        double t1 = monotonicMs();
        guard.recording = false;
        if (totalMs != nullptr) *totalMs = t1 - t0;
        const std::string when = "by forward " + std::to_string(++calls) + " (input set " + std::to_string(k) + ")";
        guard.checkInputs(feed, sets[k], when);
        guard.checkThreads("after forward " + std::to_string(calls));
        return outs;
    };
    auto release = [&](std::vector<VARP>& outs) {
        guard.remember(outs);
        outs.clear();
    };

    if (o.iterations == 0) {
        for (size_t k = 0; k < nSets; ++k) {
            auto outs = once(k, nullptr);
            writeOutputs(takeOutputs(outs, o, info->defaultFormat), o, sets[k].outDir);
            release(outs);
        }
        return 0;
    }
    for (int i = 0; i < o.warmup; ++i) {
        auto outs = once(static_cast<size_t>(i) % nSets, nullptr);
        release(outs);
    }
    std::vector<double> opMs, totalMs;
    std::map<std::string, int> counts;
    // Every timed forward's outputs are checked, not only those the kit compares with ONNX Runtime: the first
    // timed forward of each set is kept (and written at the end), every later one on that set must give the
    // same bytes (the forwards are deterministic: same inputs, same kernels, same thread count).  Outputs are
    // poisoned before every forward, so a forward that skipped its work differs.  Without this a kernel that
    // did nothing on all timed forwards but the last two scored 344x on the fixture's ArgMax.  The check runs
    // after the forward's clock stopped and before the next forward's poisoning, outside every timed window,
    // and native and candidate pay it alike (one runner).  Its cost, measured on MNN 3.2.2 with 3.2 MB outputs
    // (hard_sigmoid_4d, resize_bilinear_x2, transpose_nchw_to_nhwc, batchnorm_4d; 5 runs of 30 timed forwards
    // each, on the 2-core dev VM at a load of ~4): median 0.6 ms a forward (0.2-1.1 ms), as long as the forward
    // itself; it lies inside phase_ms, so the gap the kit's clock check allows is unchanged.
    std::vector<std::vector<Taken>> first(nSets);
    for (int i = 0; i < o.iterations; ++i) {
        const size_t k = static_cast<size_t>(i) % nSets;
        double total = 0.0;
        clock.reset();
        clock.active = true;
        auto outs = once(k, &total);
        clock.active = false;
        opMs.push_back(clock.selectedMs);
        totalMs.push_back(total);
        counts = clock.counts;  // every set has the same shapes, so the same op list
        if (static_cast<size_t>(i) < nSets) {
            first[k] = takeOutputs(outs, o, info->defaultFormat);
        } else {
            const std::string changed = changedOutput(outs, first[k], o, info->defaultFormat);
            if (!changed.empty()) {
                fail("output '" + changed + "' of timed forward " + std::to_string(i + 1) + " (input set " +
                         std::to_string(k) + ") differs from that of timed forward " + std::to_string(k + 1) +
                         " on the same inputs: a forward did not do its work",
                     kExitTimedOutputChanged);
            }
        }
        release(outs);
    }
    const double phaseMs = monotonicMs() - phaseStart;
    // From here on no code of the candidate's may run: nothing of it runs in this thread any more (no forward,
    // no conversion), no thread of it exists (counted now; MNN's pool workers idle between forwards), a handler
    // of a signal cannot run on this thread (blocked), and main leaves by exit_group right after these writes,
    // so no destructor, atexit or fini function of the library runs after them (leaveNow).  What is left: a
    // process the candidate forked (threads are counted, processes are not; the sandbox's PID namespace ends it
    // with the runner, but it may act before that), and a signal handler run by a pool worker with --threads
    // > 1 (the static checks reject signals, processes and file I/O in the sources).
    guard.checkThreads("after the timed forwards");
    blockSignals();
    writeText(o.outDir + "/timing.json", timingJson(opMs, totalMs, counts, phaseMs));
    for (size_t k = 0; k < nSets; ++k) writeOutputs(first[k], o, sets[k].outDir);
    return 0;
}

// Every way out of main goes through here: stdio flushed (MNN prints its messages on stdout), then exit_group.
[[noreturn]] void leave(int code) {
    std::fflush(stdout);
    std::fflush(stderr);
    leaveNow(code);
}

}  // namespace

int main(int argc, char** argv) {
    Options opts;
    try {
        opts = parseArgs(argc, argv);
    } catch (const Failure& f) {
        std::fprintf(stderr, "mkb_runner: %s\nusage: mkb_runner <model_file> <in_dir> <out_dir> --outputs y[,z] "
                             "[--threads N] [--precision high|normal|low] [--warmup W] [--iterations N] "
                             "[--op-types A,B|*] [--wait-go 0|1] [--extra-threads E]\n",
                     f.message.c_str());
        leave(kExitUsage);
    }
    try {
        leave(run(opts));
    } catch (const Failure& f) {
        std::fprintf(stderr, "mkb_runner: error: %s\n", f.message.c_str());
        leave(f.code);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mkb_runner: error: %s\n", e.what());
        leave(kExitError);
    }
}
