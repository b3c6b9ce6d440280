#include "backend/cpu/CPUUnary.hpp"

#include <cmath>

namespace MNN {

ErrorCode CPUUnary::onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) {
    const float* src = inputs[0]->host<float>();
    float* dst = outputs[0]->host<float>();
    const size_t n = inputs[0]->elementSize();
    for (size_t i = 0; i < n; ++i) {
        float v = src[i];
        dst[i] = mType == UnaryOpOperation_EXP ? std::exp(v) : mType == UnaryOpOperation_NEG ? -v : std::fabs(v);
    }
    return NO_ERROR;
}

class CPUUnaryCreator : public CPUBackend::Creator {
public:
    Execution* onCreate(const std::vector<Tensor*>&, const std::vector<Tensor*>&, const Op* op,
                        Backend* backend) const override {
        return new CPUUnary(backend, op->intAttr("opType", -1));
    }
};

REGISTER_CPU_OP_CREATOR(CPUUnaryCreator, OpType_UnaryOp);

}  // namespace MNN
