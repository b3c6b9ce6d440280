#include "backend/cpu/CPUUnary.hpp"

#include <cmath>

namespace MNN {

static void unaryAbs(float* dst, const float* src, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = std::fabs(src[i]);
}
static void unaryNeg(float* dst, const float* src, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = -src[i];
}
static void unaryExp(float* dst, const float* src, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = std::exp(src[i]);
}

CPUUnary::CPUUnary(Backend* backend, UnaryProc proc) : Execution(backend), mProc(proc) {}

CPUUnary::UnaryProc CPUUnary::selectForFloat(int type, Precision precision) {
    (void)precision;
    switch (type) {
        case UnaryOpOperation_ABS: return unaryAbs;
        case UnaryOpOperation_NEG: return unaryNeg;
        case UnaryOpOperation_EXP: return unaryExp;
        default: return nullptr;
    }
}

ErrorCode CPUUnary::onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) {
    mProc(outputs[0]->host<float>(), inputs[0]->host<float>(), inputs[0]->elementSize());
    return NO_ERROR;
}

class CPUUnaryCreator : public CPUBackend::Creator {
public:
    Execution* onCreate(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs, const Op* op,
                        Backend* backend) const override {
        (void)outputs;
        if (inputs[0]->type() != DataType::Float32) return nullptr;
        auto proc = CPUUnary::selectForFloat(op->intAttr("opType", -1), backend->precision());
        return proc == nullptr ? nullptr : new CPUUnary(backend, proc);
    }
};

REGISTER_CPU_OP_CREATOR(CPUUnaryCreator, OpType_UnaryOp);

}  // namespace MNN
