#include "backend/cpu/CPUUnary.hpp"

#include <cmath>

namespace MNN {

// Four-way unrolled over the elements before the last, which is done apart (its index computed once).  Right for
// every size but 0: there ``n - 1`` wraps to SIZE_MAX and the loop runs off the end of both buffers.
static void expFloat(float* dst, const float* src, size_t n) {
    const size_t last = n - 1;
    size_t i = 0;
    for (; i + 4 <= last; i += 4) {
        dst[i] = expf(src[i]);
        dst[i + 1] = expf(src[i + 1]);
        dst[i + 2] = expf(src[i + 2]);
        dst[i + 3] = expf(src[i + 3]);
    }
    for (; i < last; ++i) dst[i] = expf(src[i]);
    dst[last] = expf(src[last]);
}
static void absFloat(float* dst, const float* src, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = src[i] < 0.f ? -src[i] : src[i];
}
static void negFloat(float* dst, const float* src, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = -src[i];
}

CPUUnary::CPUUnary(Backend* backend, UnaryProc proc) : Execution(backend), mProc(proc) {}

CPUUnary::UnaryProc CPUUnary::selectForFloat(int type, Precision) {
    if (type == UnaryOpOperation_EXP) return expFloat;
    if (type == UnaryOpOperation_ABS) return absFloat;
    if (type == UnaryOpOperation_NEG) return negFloat;
    return nullptr;
}

ErrorCode CPUUnary::onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) {
    mProc(outputs[0]->host<float>(), inputs[0]->host<float>(), inputs[0]->elementSize());
    return NO_ERROR;
}

class CPUUnaryCreator : public CPUBackend::Creator {
public:
    Execution* onCreate(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>&, const Op* op,
                        Backend* backend) const override {
        if (inputs[0]->type() != DataType::Float32) return nullptr;
        CPUUnary::UnaryProc proc = CPUUnary::selectForFloat(op->intAttr("opType", -1), backend->precision());
        return proc ? new CPUUnary(backend, proc) : nullptr;
    }
};

REGISTER_CPU_OP_CREATOR(CPUUnaryCreator, OpType_UnaryOp);

}  // namespace MNN
