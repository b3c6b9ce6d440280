#include "shape/SizeComputer.hpp"

#include <algorithm>

namespace MNN {

int normalizeAxis(int axis, int rank) {
    if (axis < 0) axis += rank;
    return (axis < 0 || axis >= rank) ? -1 : axis;
}

static bool fail(std::string* err, const Op& op, const std::string& what) {
    *err = std::string(opTypeName(op.type)) + " '" + op.name + "': " + what;
    return false;
}

static bool reducedShape(const Op& op, const Tensor* x, const std::vector<int>& axesIn, bool keep,
                         std::vector<int>* out, std::string* err) {
    int rank = x->dimensions();
    std::vector<bool> reduce(rank, axesIn.empty());
    for (int a : axesIn) {
        int n = normalizeAxis(a, rank);
        if (n < 0) return fail(err, op, "axis " + std::to_string(a) + " out of range");
        reduce[n] = true;
    }
    out->clear();
    for (int i = 0; i < rank; ++i) {
        if (!reduce[i]) out->push_back(x->length(i));
        else if (keep) out->push_back(1);
    }
    return true;
}

bool computeOutputShapes(const Op& op, const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                         std::string* err) {
    if (inputs.empty() || outputs.empty()) return fail(err, op, "needs at least one input and one output");
    for (auto* t : inputs) {
        if (!t->allocated()) return fail(err, op, "input has no shape");
    }
    const Tensor* x = inputs[0];
    switch (op.type) {
        case OpType_UnaryOp:
        case OpType_Softmax:
            if (op.type == OpType_Softmax && normalizeAxis(op.intAttr("axis", -1), x->dimensions()) < 0)
                return fail(err, op, "axis out of range");
            outputs[0]->resize(x->shape(), x->type());
            return true;
        case OpType_BinaryOp: {
            if (inputs.size() != 2) return fail(err, op, "needs two inputs");
            const auto& a = inputs[0]->shape();
            const auto& b = inputs[1]->shape();
            size_t rank = std::max(a.size(), b.size());
            std::vector<int> s(rank);
            for (size_t i = 0; i < rank; ++i) {
                int da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
                int db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
                if (da != db && da != 1 && db != 1) return fail(err, op, "shapes do not broadcast");
                s[i] = std::max(da, db);
            }
            outputs[0]->resize(s, x->type());
            return true;
        }
        case OpType_ArgMax: {
            std::vector<int> s;
            if (!reducedShape(op, x, {op.intAttr("axis", 0)}, op.intAttr("keepDims", 1) != 0, &s, err)) return false;
            outputs[0]->resize(s, DataType::Int32);
            return true;
        }
        case OpType_Reduction: {
            std::vector<int> s;
            const std::vector<int>* axes = op.listAttr("dim");
            if (!reducedShape(op, x, axes ? *axes : std::vector<int>(), op.intAttr("keepDims", 1) != 0, &s, err))
                return false;
            outputs[0]->resize(s, x->type());
            return true;
        }
        case OpType_MatMul: {
            if (inputs.size() != 2 || inputs[0]->dimensions() != 2 || inputs[1]->dimensions() != 2)
                return fail(err, op, "only 2-D x 2-D is supported");
            bool ta = op.intAttr("transposeA", 0) != 0, tb = op.intAttr("transposeB", 0) != 0;
            int m = ta ? inputs[0]->length(1) : inputs[0]->length(0);
            int ka = ta ? inputs[0]->length(0) : inputs[0]->length(1);
            int kb = tb ? inputs[1]->length(1) : inputs[1]->length(0);
            int n = tb ? inputs[1]->length(0) : inputs[1]->length(1);
            if (ka != kb) return fail(err, op, "inner dimensions differ");
            outputs[0]->resize({m, n}, DataType::Float32);
            return true;
        }
        case OpType_Transpose: {
            const std::vector<int>* perm = op.listAttr("perm");
            int rank = x->dimensions();
            std::vector<int> p(rank);
            for (int i = 0; i < rank; ++i) p[i] = rank - 1 - i;
            if (perm != nullptr) {
                if (static_cast<int>(perm->size()) != rank) return fail(err, op, "perm length differs from rank");
                p = *perm;
            }
            std::vector<int> s(rank);
            std::vector<bool> seen(rank, false);
            for (int i = 0; i < rank; ++i) {
                int a = normalizeAxis(p[i], rank);
                if (a < 0 || seen[a]) return fail(err, op, "perm is not a permutation");
                seen[a] = true;
                s[i] = x->length(a);
            }
            outputs[0]->resize(s, x->type());
            return true;
        }
        case OpType_Raster: {
            const std::vector<int>* shape = op.listAttr("shape");
            if (shape == nullptr) return fail(err, op, "missing 'shape'");
            outputs[0]->resize(*shape, x->type());
            return true;
        }
        default:
            return fail(err, op, "unknown op type");
    }
}

}  // namespace MNN
