#include "backend/cpu/CPUBinary.hpp"

namespace MNN {

static float binAdd(float a, float b) { return a + b; }
static float binSub(float a, float b) { return a - b; }
static float binMul(float a, float b) { return a * b; }
static float binDiv(float a, float b) { return a / b; }

CPUBinary::CPUBinary(Backend* backend, BinaryProc proc) : Execution(backend), mProc(proc) {}

CPUBinary::BinaryProc CPUBinary::selectForFloat(int type) {
    switch (type) {
        case BinaryOpOperation_ADD: return binAdd;
        case BinaryOpOperation_SUB: return binSub;
        case BinaryOpOperation_MUL: return binMul;
        case BinaryOpOperation_DIV: return binDiv;
        default: return nullptr;
    }
}

// Strides of `shape` right-aligned to `rank` dims, 0 on broadcast dims.
static std::vector<size_t> broadcastStrides(const std::vector<int>& shape, const std::vector<int>& out) {
    size_t rank = out.size(), off = rank - shape.size();
    std::vector<size_t> st(rank, 0);
    size_t s = 1;
    for (size_t i = rank; i-- > off;) {
        int d = shape[i - off];
        st[i] = d == 1 ? 0 : s;
        s *= static_cast<size_t>(d);
    }
    return st;
}

ErrorCode CPUBinary::onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) {
    const auto& out = outputs[0]->shape();
    const float* a = inputs[0]->host<float>();
    const float* b = inputs[1]->host<float>();
    float* c = outputs[0]->host<float>();
    size_t total = outputs[0]->elementSize();
    if (inputs[0]->shape() == out && inputs[1]->shape() == out) {
        for (size_t i = 0; i < total; ++i) c[i] = mProc(a[i], b[i]);
        return NO_ERROR;
    }
    auto sa = broadcastStrides(inputs[0]->shape(), out);
    auto sb = broadcastStrides(inputs[1]->shape(), out);
    std::vector<int> idx(out.size(), 0);
    size_t ia = 0, ib = 0;
    for (size_t i = 0; i < total; ++i) {
        c[i] = mProc(a[ia], b[ib]);
        for (size_t d = out.size(); d-- > 0;) {  // odometer increment
            ++idx[d];
            ia += sa[d];
            ib += sb[d];
            if (idx[d] < out[d]) break;
            ia -= sa[d] * out[d];
            ib -= sb[d] * out[d];
            idx[d] = 0;
        }
    }
    return NO_ERROR;
}

class CPUBinaryCreator : public CPUBackend::Creator {
public:
    Execution* onCreate(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs, const Op* op,
                        Backend* backend) const override {
        (void)outputs;
        if (inputs[0]->type() != DataType::Float32 || inputs[1]->type() != DataType::Float32) return nullptr;
        auto proc = CPUBinary::selectForFloat(op->intAttr("opType", -1));
        return proc == nullptr ? nullptr : new CPUBinary(backend, proc);
    }
};

REGISTER_CPU_OP_CREATOR(CPUBinaryCreator, OpType_BinaryOp);

}  // namespace MNN
