#include "core/Net.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "geometry/GeometryComputer.hpp"
#include "shape/SizeComputer.hpp"

namespace MNN {

Net::~Net() = default;

int Net::tensorIndex(const std::string& name, bool create) {
    auto it = mNames.find(name);
    if (it != mNames.end()) return it->second;
    if (!create) return -1;
    mTensors.emplace_back(new Tensor);
    mNames[name] = static_cast<int>(mTensors.size()) - 1;
    return mNames[name];
}

Tensor* Net::getTensor(const std::string& name) {
    int i = tensorIndex(name, false);
    return i < 0 ? nullptr : mTensors[i].get();
}

namespace {
struct Reader {
    std::istringstream in;
    bool bad = false;
    std::string word() {
        std::string w;
        if (!(in >> w)) bad = true;
        return w;
    }
    long integer() {
        std::string w = word();
        char* end = nullptr;
        long v = std::strtol(w.c_str(), &end, 10);
        if (w.empty() || *end != '\0') bad = true;
        return v;
    }
    float real() {
        std::string w = word();
        char* end = nullptr;
        float v = std::strtof(w.c_str(), &end);
        if (w.empty() || *end != '\0') bad = true;
        return v;
    }
};
}  // namespace

Net* Net::createFromFile(const char* path, std::string* err) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        *err = std::string("cannot open model file ") + path;
        return nullptr;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    Reader r;
    r.in.str(ss.str());
    std::unique_ptr<Net> net(new Net);
    if (r.word() != "FIXMODEL" || r.integer() != 1) {
        *err = std::string(path) + ": not a fixture model (bad header)";
        return nullptr;
    }
    auto readShape = [&](std::vector<int>* dims, DataType* type) {
        std::string t = r.word();
        if (!parseDataType(t.c_str(), type)) r.bad = true;
        long nd = r.integer();
        if (nd < 0 || nd > 8) r.bad = true;
        for (long i = 0; i < nd && !r.bad; ++i) {
            long d = r.integer();
            if (d <= 0) r.bad = true;
            dims->push_back(static_cast<int>(d));
        }
    };
    for (;;) {
        std::string kind = r.word();
        if (r.bad) break;
        if (kind == "end") break;
        if (kind == "input" || kind == "const") {
            std::string name = r.word();
            std::vector<int> dims;
            DataType type;
            readShape(&dims, &type);
            if (r.bad) break;
            Tensor* t = net->mTensors[net->tensorIndex(name, true)].get();
            t->resize(dims, type);
            if (kind == "input") {
                net->mInputs.push_back(name);
            } else {
                for (size_t i = 0; i < t->elementSize() && !r.bad; ++i) {
                    if (type == DataType::Float32) t->host<float>()[i] = r.real();
                    else t->host<int32_t>()[i] = static_cast<int32_t>(r.integer());
                }
            }
        } else if (kind == "op") {
            Op op;
            std::string type = r.word();
            if (!parseOpType(type, &op.type)) {
                *err = std::string(path) + ": unknown op type " + type;
                return nullptr;
            }
            op.name = r.word();
            for (auto* list : {&op.inputIndexes, &op.outputIndexes}) {
                long n = r.integer();
                for (long i = 0; i < n && !r.bad; ++i) list->push_back(net->tensorIndex(r.word(), true));
            }
            long nattr = r.integer();
            for (long a = 0; a < nattr && !r.bad; ++a) {
                std::string k = r.word();
                std::string key = r.word();
                if (k == "i") {
                    long n = r.integer();
                    std::vector<int> v;
                    for (long i = 0; i < n && !r.bad; ++i) v.push_back(static_cast<int>(r.integer()));
                    op.ints[key] = v;
                } else if (k == "f") {
                    op.floats[key] = r.real();
                } else {
                    r.bad = true;
                }
            }
            net->mOps.push_back(op);
        } else if (kind == "output") {
            std::string name = r.word();
            if (net->tensorIndex(name, false) < 0) {
                *err = std::string(path) + ": output " + name + " is produced by nothing";
                return nullptr;
            }
            net->mOutputs.push_back(name);
        } else {
            r.bad = true;
        }
    }
    if (r.bad) {
        *err = std::string(path) + ": malformed model file";
        return nullptr;
    }
    if (net->mInputs.empty() || net->mOutputs.empty()) {
        *err = std::string(path) + ": model has no inputs or no outputs";
        return nullptr;
    }
    return net.release();
}

bool Net::prepare(int threads, Precision precision, std::string* err) {
    ensureRegistered();
    mBackend.reset(new Backend(threads, precision));
    mPlan.clear();
    mExecutions.clear();
    // the shapes the model is prepared for: the file's, or those a caller set before (the runner's first set)
    mInputShapes.clear();
    for (const std::string& name : mInputs) mInputShapes.push_back(getTensor(name)->shape());
    auto tensorsOf = [this](const std::vector<int>& idx) {
        std::vector<Tensor*> v;
        for (int i : idx) v.push_back(mTensors[i].get());
        return v;
    };
    for (const Op& op : mOps) {
        auto ins = tensorsOf(op.inputIndexes);
        auto outs = tensorsOf(op.outputIndexes);
        if (!computeOutputShapes(op, ins, outs, err)) return false;
        const GeometryComputer* geo = GeometryComputer::search(op.type);
        if (geo == nullptr) {
            mPlan.push_back(op);
            continue;
        }
        CommandBuffer cmd;
        if (!geo->onCompute(&op, ins, outs, cmd)) {
            *err = std::string("geometry failed for ") + opTypeName(op.type) + " '" + op.name + "'";
            return false;
        }
        for (auto& lowered : cmd.ops) mPlan.push_back(lowered);
    }
    for (const Op& op : mPlan) {
        auto ins = tensorsOf(op.inputIndexes);
        auto outs = tensorsOf(op.outputIndexes);
        const CPUBackend::Creator* creator = CPUBackend::findCreator(op.type);
        if (creator == nullptr) {
            *err = std::string("no CPU kernel registered for ") + opTypeName(op.type);
            return false;
        }
        Execution* exe = creator->onCreate(ins, outs, &op, mBackend.get());
        if (exe == nullptr) {
            *err = std::string("CPU kernel refused ") + opTypeName(op.type) + " '" + op.name + "'";
            return false;
        }
        mExecutions.emplace_back(exe);
        if (exe->onResize(ins, outs) != NO_ERROR) {
            *err = std::string("onResize failed for ") + opTypeName(op.type) + " '" + op.name + "'";
            return false;
        }
    }
    return true;
}

bool Net::run(const OpCallback& before, const OpCallback& after, std::string* err) {
    if (mExecutions.size() != mPlan.size() || mPlan.empty()) {
        *err = "run() before a successful prepare()";
        return false;
    }
    bool changed = false;
    for (size_t i = 0; i < mInputs.size(); ++i) {
        Tensor* t = getTensor(mInputs[i]);
        if (t->shape() != mInputShapes[i]) {
            t->reshape(mInputShapes[i]);
            changed = true;
        }
    }
    for (size_t i = 0; i < mPlan.size(); ++i) {
        const Op& op = mPlan[i];
        std::vector<Tensor*> ins, outs;
        for (int t : op.inputIndexes) ins.push_back(mTensors[t].get());
        for (int t : op.outputIndexes) outs.push_back(mTensors[t].get());
        if (changed && mExecutions[i]->onResize(ins, outs) != NO_ERROR) {
            *err = std::string("onResize failed for ") + opTypeName(op.type) + " '" + op.name + "'";
            return false;
        }
    }
    for (size_t i = 0; i < mPlan.size(); ++i) {
        const Op& op = mPlan[i];
        std::vector<Tensor*> ins, outs;
        for (int t : op.inputIndexes) ins.push_back(mTensors[t].get());
        for (int t : op.outputIndexes) outs.push_back(mTensors[t].get());
        if (before) before(op);
        ErrorCode code = mExecutions[i]->onExecute(ins, outs);
        if (after) after(op);
        if (code != NO_ERROR) {
            *err = std::string("onExecute failed (code ") + std::to_string(code) + ") for " + opTypeName(op.type) +
                   " '" + op.name + "'";
            return false;
        }
    }
    return true;
}

}  // namespace MNN
