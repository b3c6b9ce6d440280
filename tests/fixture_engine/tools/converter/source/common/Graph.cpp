#include "common/Graph.hpp"

#include <cstdio>

namespace fixconv {

const OnnxTensor* ConvGraph::initializer(const std::string& name) const {
    auto it = mOnnx.initializers.find(name);
    return it == mOnnx.initializers.end() ? nullptr : &it->second;
}

std::string ConvGraph::newName(const std::string& hint) {
    std::string name;
    do {
        name = hint + "__" + std::to_string(mCounter++);
    } while (mUsed.count(name) || initializer(name) != nullptr);
    mUsed.insert(name);
    return name;
}

FixOp& ConvGraph::addOp(const std::string& type, const std::string& name) {
    mOps.emplace_back();
    mOps.back().type = type;
    mOps.back().name = name.empty() ? newName(type) : name;
    return mOps.back();
}

std::string ConvGraph::addConst(const std::string& hint, const std::vector<int>& dims, const std::vector<float>& values) {
    FixTensor t;
    t.name = newName(hint);
    t.dims = dims;
    t.floats = values;
    mConsts.push_back(t);
    return t.name;
}

std::string ConvGraph::addIntConst(const std::string& hint, const std::vector<int>& dims, const std::vector<int>& values) {
    FixTensor t;
    t.name = newName(hint);
    t.isInt = true;
    t.dims = dims;
    t.ints = values;
    mConsts.push_back(t);
    return t.name;
}

static std::string clean(const std::string& name) {
    std::string s = name.empty() ? std::string("_") : name;
    for (char& c : s) {
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') c = '_';
    }
    return s;
}

static void writeShape(FILE* f, bool isInt, const std::vector<int>& dims) {
    std::fprintf(f, " %s %d", isInt ? "int32" : "float32", static_cast<int>(dims.size()));
    for (int d : dims) std::fprintf(f, " %d", d);
}

bool ConvGraph::write(const std::string& path, std::string* err) const {
    // Initializers referenced by ops become constants.
    std::vector<FixTensor> consts = mConsts;
    std::set<std::string> done;
    for (const auto& c : consts) done.insert(c.name);
    for (const auto& op : mOps) {
        for (const auto& in : op.inputs) {
            const OnnxTensor* t = initializer(in);
            if (t == nullptr || done.count(in)) continue;
            FixTensor c;
            c.name = in;
            for (auto d : t->dims) c.dims.push_back(static_cast<int>(d));
            if (t->dataType == ONNX_FLOAT || t->dataType == ONNX_DOUBLE) {
                c.floats = t->floats;
            } else {
                c.isInt = true;
                for (auto v : t->ints) c.ints.push_back(static_cast<int>(v));
            }
            size_t n = 1;
            for (int d : c.dims) n *= static_cast<size_t>(d);
            if ((c.isInt ? c.ints.size() : c.floats.size()) != n) {
                *err = "initializer " + in + " has an unsupported data type or no data";
                return false;
            }
            consts.push_back(c);
            done.insert(in);
        }
    }
    FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) {
        *err = "cannot write " + path;
        return false;
    }
    std::fprintf(f, "FIXMODEL 1\n");
    for (const auto& in : mOnnx.inputs) {
        std::vector<int> dims;
        for (auto d : in.dims) {
            if (d <= 0) {
                std::fclose(f);
                *err = "input " + in.name + " has a symbolic or zero dimension";
                return false;
            }
            dims.push_back(static_cast<int>(d));
        }
        bool isInt = in.elemType == ONNX_INT32 || in.elemType == ONNX_INT64 || in.elemType == ONNX_BOOL;
        if (!isInt && in.elemType != ONNX_FLOAT) {
            std::fclose(f);
            *err = "input " + in.name + " has unsupported elem_type " + std::to_string(in.elemType);
            return false;
        }
        std::fprintf(f, "input %s", clean(in.name).c_str());
        writeShape(f, isInt, dims);
        std::fprintf(f, "\n");
    }
    for (const auto& c : consts) {
        std::fprintf(f, "const %s", clean(c.name).c_str());
        writeShape(f, c.isInt, c.dims);
        if (c.isInt) {
            for (int v : c.ints) std::fprintf(f, " %d", v);
        } else {
            for (float v : c.floats) std::fprintf(f, " %.9g", v);
        }
        std::fprintf(f, "\n");
    }
    for (const auto& op : mOps) {
        std::fprintf(f, "op %s %s %d", op.type.c_str(), clean(op.name).c_str(), static_cast<int>(op.inputs.size()));
        for (const auto& s : op.inputs) std::fprintf(f, " %s", clean(s).c_str());
        std::fprintf(f, " %d", static_cast<int>(op.outputs.size()));
        for (const auto& s : op.outputs) std::fprintf(f, " %s", clean(s).c_str());
        std::fprintf(f, " %d", static_cast<int>(op.ints.size() + op.floats.size()));
        for (const auto& kv : op.ints) {
            std::fprintf(f, " i %s %d", kv.first.c_str(), static_cast<int>(kv.second.size()));
            for (int v : kv.second) std::fprintf(f, " %d", v);
        }
        for (const auto& kv : op.floats) std::fprintf(f, " f %s %.9g", kv.first.c_str(), kv.second);
        std::fprintf(f, "\n");
    }
    for (const auto& out : mOnnx.outputs) std::fprintf(f, "output %s\n", clean(out.name).c_str());
    std::fprintf(f, "end\n");
    bool ok = std::fclose(f) == 0;
    if (!ok) *err = "error writing " + path;
    return ok;
}

}  // namespace fixconv
