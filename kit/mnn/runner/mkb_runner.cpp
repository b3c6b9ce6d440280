// mkb_runner: run one converted MNN model on raw binary tensors, with per-op timings.
//
// Written for the MobileKernelBench kit against MNN's public headers only (Module API, Executor callbacks).
//
//   mkb_runner <model_file> <in_dir> <out_dir> --outputs y[,z] [--threads N] [--precision high|normal|low]
//              [--warmup W] [--iterations N] [--op-types A,B|*] [--wait-go 0|1] [--extra-threads E]
//              [--checked K] [--pid-ns 0|1]
//
// An input set is a directory whose manifest.txt holds one line per input, "name dtype ndim d0 d1 ..." (dtype
// float32 | int32), with the data of each input in <name>.bin, raw little-endian, C order.  in_dir is one set
// (in_dir/manifest.txt; outputs go to out_dir) or several: in_dir/0/, in_dir/1/, ... (outputs of set k go to
// out_dir/k/); every set lists the same tensors.  Outputs named by --outputs are written as <name>.bin with a
// manifest.txt in the same format.
//
// --iterations 0: one forward per set, in order, each set's outputs written.  --iterations N > 0: W warm-up and
// then N timed forwards (N >= S sets): timed forward i < S on set i, whose outputs are written; every other
// timed forward on fresh inputs derived from the sets before it, the warm-ups on one derived for them (mkb_fresh.hpp); --checked K of the timed forwards on
// fresh inputs, picked at random after each, are written to out_dir/checked/<j>/out/ with the pool index of every
// unit of their inputs (mkb_fresh.hpp FreshInputs::drawn) in out_dir/checked/<j>/draw/ (the kit rebuilds the
// inputs from its own sets by them);
// a float32 output of a timed forward that still holds the poison is exit 6; and out_dir/timing.json:
//   {"op_ms": [...N], "total_ms": [...N], "op_types": {"Type": count per run, ...}, "phase_ms": P, "checked": [...]}
// op_ms sums the wall time of every executed op whose type is in --op-types ("*" = all ops); total_ms is the
// whole forward; phase_ms the wall time from reading "go" (without --wait-go: from the same point, before the
// first warm-up) to the end of the timed forwards.  Every time is read from CLOCK_MONOTONIC by the system call
// itself (mkb_guard.hpp), never through libc, whose functions the candidate's library could replace.
// The times are also streamed as they are taken (mkb_stamps.hpp): in every timed forward its begin, each
// selected op's begin and end and its end go to stderr as "@mkbt ..." lines before any candidate code runs again,
// and the kit rebuilds the samples from them (timing.json must agree: the candidate could edit this memory).
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
// Also after every forward (and before the first, and before the results are written): no process besides the
// runner (mkb_guard.hpp: its children, whose subreaper it is, and inside a PID namespace any other process:
// --pid-ns 1 says the runner runs in one, the sandbox's, as its init's child).
//
// Exit status: 0 success; 2 usage error; 3 load/shape/run/IO error or no "go"; 4 a forward changed an input
// tensor; 5 more threads than MNN's own after a forward (or before the first); 6 a timed forward left a float32
// output unwritten (the poison still there); 7 a process besides the runner; 8 a stamp not written whole, or
// stderr no longer the file it was at the start (mkb_stamps.hpp); 9 a system call the seccomp filter refuses
// once start-up is done (mkb_lockdown.hpp: the line on stderr names it); 10 a mapping larger than the memory
// limit leaves (RLIMIT_AS, named on stderr); the message is on stderr.

#include "mkb_fresh.hpp"
#include "mkb_guard.hpp"
#include "mkb_io.hpp"
#include "mkb_lockdown.hpp"
#include "mkb_stamps.hpp"

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

// In a timed forward (active), every op's begin (with its type) and end are read as integer nanoseconds and
// written to the stamp stream at once (mkb_stamps.hpp), before the op (or the next) runs: the kit selects the
// timed types itself, so no selection or count kept here in memory decides what is timed; selectedMs and counts
// are what timing.json records, the kit rebuilds both from the stream and compares.
struct OpClock {
    bool active = false;
    int64_t startNs = 0;
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

// An input set's tensors, or the derived inputs of a forward (mkb_fresh.hpp): specs and bytes, in manifest order.
struct Inputs {
    const std::vector<TensorSpec>* specs;
    const std::vector<std::vector<char>>* blobs;
    std::string label;  // "input set k" or "derived inputs"
};

void fillInputs(Feed& f, const Inputs& in) {
    for (size_t i = 0; i < in.specs->size(); ++i) {
        void* dst = f.raw[i]->writeMap<void>();
        const auto& blob = (*in.blobs)[i];
        if (blob.empty()) continue;
        if (dst == nullptr) fail("cannot map input '" + (*in.specs)[i].name + "' for writing");
        std::memcpy(dst, blob.data(), blob.size());
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

// The draw of every input tensor's last derivation (FreshInputs::drawn), as int32 tensors of one dimension.
std::vector<Taken> takeDraw(const std::vector<TensorSpec>& specs, const FreshInputs& fresh) {
    std::vector<Taken> taken;
    for (size_t t = 0; t < specs.size(); ++t) {
        Taken d{"", fresh.drawn(t)};
        d.manifestLine = specs[t].name + " int32 1 " + std::to_string(d.bytes.size() / 4) + "\n";
        taken.push_back(std::move(d));
    }
    return taken;
}

// Every float32 output of a timed forward must have been written in full: none of its words may still hold the
// poison the runner filled it with (mkb_fresh.hpp holdsPoison; int32 outputs are left out, -1 is a value).  A
// forward that skipped its work, on any timed forward, fails here at once; what one that wrote something wrong
// does is for the kit's comparisons with ONNX Runtime.  Read in place, no copy, after the forward's clock stopped.
void checkWritten(const std::vector<VARP>& outs, const Options& o, MNN::Express::Dimensionformat defaultFormat,
                  int forward) {
    for (size_t i = 0; i < outs.size(); ++i) {
        std::string dtype;
        VARP v = hostView(outs[i], o.outputs[i], defaultFormat, &dtype);
        const size_t bytes = static_cast<size_t>(v->getInfo()->size) * 4;
        if (dtype != "float32" || bytes == 0) continue;
        const char* ptr = v->readMap<char>();
        if (ptr == nullptr || holdsPoison(ptr, bytes)) {
            fail("output '" + o.outputs[i] + "' of timed forward " + std::to_string(forward) +
                     " still holds the runner's poison (NaN 0xFFFFFFFF) where the forward should have written it: "
                     "a forward did not do its work",
                 kExitTimedOutputChanged);
        }
    }
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
        // more than MNN's own: leave out the tasks already exiting, a joined thread's among them
        // (mkb_lockdown.hpp); the common case reads one file
        if (n > allowedThreads) n = mkb_lockdown::liveThreads();
        if (n < 0) fail("cannot list /proc/self/task to count the threads");
        if (n > allowedThreads) {
            fail(std::to_string(n) + " threads " + when + ", MNN's own account for " +
                     std::to_string(allowedThreads) + ": the candidate left a thread running",
                 kExitThreadsLeft);
        }
    }

    void checkInputs(Feed& f, const Inputs& in, const std::string& when) const {
        for (size_t i = 0; i < in.specs->size(); ++i) {
            const auto& blob = (*in.blobs)[i];
            if (blob.empty()) continue;
            const void* now = f.raw[i]->readMap<void>();
            if (now == nullptr || !sameBytes(now, blob.data(), blob.size())) {
                fail("input '" + (*in.specs)[i].name + "' was modified " + when, kExitInputModified);
            }
        }
    }

    ProcessView processes;  // the sandbox's init and the runner: what /proc may list (mkb_guard.hpp)

    // No process but the runner (and the sandbox's init above it): a child, a child's child (the runner is their
    // subreaper) or, inside a PID namespace, any other process is the candidate's.
    void checkProcesses(const std::string& when) const {
        if (long above = processes.wrongParent()) {
            fail("the runner's parent is process " + std::to_string(above) + ", not the sandbox's init: a process "
                     "of the candidate's forked the runner and stays above it",
                 kExitProcessLeft);
        }
        long child = childProcess();
        long other = child != 0 ? child : processes.stranger();
        if (other == -1 && child == 0) fail("cannot list /proc to look for processes " + when);
        if (other != 0) {
            fail((other > 0 ? "process " + std::to_string(other) : std::string("a child process")) + " exists " +
                     when + ", besides the runner: the candidate started a process",
                 kExitProcessLeft);
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

// Start-up is done (model loaded, session and thread pool made, output folder open): from here on the seccomp
// filter refuses the system calls no kernel needs (mkb_lockdown.hpp).  Under an emulator (--extra-threads > 0:
// qemu-user, which has no seccomp) the runner says so and goes on with its other checks; anywhere else a filter
// that cannot be installed stops the run (exit 9): a filter of the candidate's, installed before main, could
// refuse or fake the call.
void lockDown(const Options& o) {
    if (const char* why = mkb_lockdown::lockDown(outFolder().fd)) {
        if (o.extraThreads == 0) {
            fail(std::string("cannot install the runner's seccomp filter: ") + why, mkb_lockdown::kExitForbiddenCall);
        }
        std::fprintf(stderr, "mkb_runner: note: no seccomp filter: %s; the runner's other checks stand\n", why);
        std::fflush(stderr);
    }
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
    openOutFolder(o.outDir);
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
    Stamps stamps;
    if (!stamps.init()) fail("cannot fstat stderr, where the stamp stream goes");
    m.executor->setCallBack(
        [&clock, &stamps](const std::vector<MNN::Tensor*>&, const MNN::OperatorInfo* op) {
            if (clock.active) {
                clock.counts[op->type()] += 1;
                clock.startNs = monotonicNs();
                stamps.write('b', -1, clock.startNs, false, op->type().c_str());
            }
            return true;
        },
        [&clock, &guard, &o, &stamps](const std::vector<MNN::Tensor*>& outputs, const MNN::OperatorInfo* op) {
            if (clock.active) {
                const int64_t end = monotonicNs();
                stamps.write('e', -1, end, true);
                if (o.allOps || o.opTypes.count(op->type())) {
                    clock.selectedMs += static_cast<double>(end - clock.startNs) * 1e-6;
                }
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
    becomeSubreaper();  // a process forked twice is reparented to the runner, where wait4 sees it
    guard.processes.init(o.pidNamespace);
    guard.checkProcesses("before the first forward");
#ifndef MKB_NO_LOCKDOWN  // defined only to measure what the filter costs (docs/untrusted.md)
    lockDown(o);
#endif
    if (o.waitGo) waitForGo();
    const double phaseStart = monotonicMs();

    // one forward on set k: inputs filled and the last outputs poisoned before it, checked after it; *totalMs
    // gets the forward's own time, and a timed forward (timed: its 1-based number) streams its begin and end
    int calls = 0;
    auto once = [&](const Inputs& in, double* totalMs, long timed = 0) {
        fillInputs(feed, in);
        guard.apply();
        guard.written.clear();
        guard.recording = true;
        const int64_t t0 = monotonicNs();
        if (timed > 0) stamps.write('F', timed, t0, true);
        std::vector<VARP> outs = forward(*m.net, feed, o.outputs.size());
        const int64_t t1 = monotonicNs();
        if (timed > 0) stamps.write('E', timed, t1, true);
        guard.recording = false;
        if (totalMs != nullptr) *totalMs = static_cast<double>(t1 - t0) * 1e-6;
        const std::string when = "by forward " + std::to_string(++calls) + " (" + in.label + ")";
        guard.checkInputs(feed, in, when);
        guard.checkThreads("after forward " + std::to_string(calls));
        guard.checkProcesses("after forward " + std::to_string(calls));
        return outs;
    };
    auto setInputs = [&](size_t k) { return Inputs{&sets[k].specs, &sets[k].blobs, "input set " + std::to_string(k)}; };
    auto release = [&](std::vector<VARP>& outs) {
        guard.remember(outs);
        outs.clear();
    };

    if (o.iterations == 0) {
        for (size_t k = 0; k < nSets; ++k) {
            auto outs = once(setInputs(k), nullptr);
            writeOutputs(takeOutputs(outs, o, info->defaultFormat), o, sets[k].outDir);
            release(outs);
        }
        return 0;
    }
    // Fresh inputs (mkb_fresh.hpp): every timed forward after the first on each set runs on inputs derived from
    // the sets, drawn before the forward (outside its clock), the warm-ups on one input derived for them; `picker` chooses, after each
    // timed one, whether it is written out with its inputs for the kit to compare with ONNX Runtime.
    std::vector<std::vector<const std::vector<char>*>> pool;
    for (const auto& set : sets) {
        pool.emplace_back();
        for (const auto& blob : set.blobs) pool.back().push_back(&blob);
    }
    FreshInputs fresh;
    std::vector<std::vector<char>> derived;
    if (!fresh.init(pool, derived)) fail("no random bytes from getrandom");
    const Inputs derivedInputs{&sets[0].specs, &derived, "derived inputs"};
    Picker picker{static_cast<size_t>(o.checked), static_cast<size_t>(o.iterations) - nSets};
    // the warm-ups run on one input derived for them: a derivation costs about as much as a small forward (0.3-0.5
    // ms for a 4 MB tensor) and a warm-up's input is never timed, kept or compared, so one per warm-up buys nothing
    if (o.warmup > 0) fresh.next(derived);
    for (int i = 0; i < o.warmup; ++i) {
        auto outs = once(derivedInputs, nullptr);
        release(outs);
    }
    std::vector<double> opMs, totalMs;
    std::map<std::string, int> counts;
    std::vector<std::vector<Taken>> first(nSets);
    std::vector<int> checkedAt;
    std::vector<std::pair<std::vector<Taken>, std::vector<Taken>>> checked;  // draw, outputs
    for (int i = 0; i < o.iterations; ++i) {
        const bool onSet = static_cast<size_t>(i) < nSets;
        if (!onSet) fresh.next(derived);
        const Inputs in = onSet ? setInputs(static_cast<size_t>(i)) : derivedInputs;
        double total = 0.0;
        clock.reset();
        clock.active = true;
        auto outs = once(in, &total, i + 1);
        clock.active = false;
        opMs.push_back(clock.selectedMs);
        totalMs.push_back(total);
        counts = clock.counts;  // every set has the same shapes, so the same op list
        checkWritten(outs, o, info->defaultFormat, i + 1);
        if (onSet) {
            first[static_cast<size_t>(i)] = takeOutputs(outs, o, info->defaultFormat);
        } else if (picker.pick()) {
            checkedAt.push_back(i + 1);
            checked.emplace_back(takeDraw(sets[0].specs, fresh), takeOutputs(outs, o, info->defaultFormat));
        }
        release(outs);
    }
    const double phaseMs = monotonicMs() - phaseStart;
    // From here on no code of the candidate's may run: nothing of it runs in this thread any more (no forward,
    // no conversion), no thread of it exists (counted now; MNN's pool workers idle between forwards), a handler
    // of a signal cannot run on this thread (blocked), and main leaves by exit_group right after these writes,
    // so no destructor, atexit or fini function of the library runs after them (leaveNow).  No process of it exists
    // either (checked below).  What is left: a signal handler run by a pool worker with --threads > 1 (the
    // static checks reject signals and file I/O in the sources).
    guard.checkThreads("after the timed forwards");
    blockSignals();
    guard.checkProcesses("after the timed forwards");
    for (size_t k = 0; k < nSets; ++k) writeOutputs(first[k], o, sets[k].outDir);
    std::vector<std::string> inputNames;
    for (const auto& spec : sets[0].specs) inputNames.push_back(spec.name);
    for (size_t j = 0; j < checked.size(); ++j) {
        const std::string dir = o.outDir + "/checked/" + std::to_string(j);
        makeDir(o.outDir + "/checked");
        makeDir(dir);
        writeTaken(checked[j].first, inputNames, dir + "/draw");
        writeOutputs(checked[j].second, o, dir + "/out");
    }
    // timing.json last, with the runner's clock at the end of all the writes (written_ms): the kit compares its
    // own wall time of the run with that, not with phase_ms, so writing outputs on a loaded host is not taken
    // for a slowed clock (measured: 262 ms from the last forward to exit for a 4 MB transpose at load 5-8)
    const double writtenMs = monotonicMs() - phaseStart;
    writeText(o.outDir + "/timing.json", timingJson(opMs, totalMs, counts, phaseMs, checkedAt, writtenMs));
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
                             "[--op-types A,B|*] [--wait-go 0|1] [--extra-threads E] [--checked K] [--pid-ns 0|1]\n",
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
