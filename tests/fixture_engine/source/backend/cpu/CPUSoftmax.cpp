#include "backend/cpu/CPUSoftmax.hpp"

#include "backend/cpu/CPUUnary.hpp"
#include "shape/SizeComputer.hpp"

namespace MNN {

CPUSoftmax::CPUSoftmax(Backend* backend, int axis) : Execution(backend), mAxis(axis) {}

ErrorCode CPUSoftmax::onResize(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) {
    (void)outputs;
    const Tensor* x = inputs[0];
    int axis = normalizeAxis(mAxis, x->dimensions());
    if (axis < 0) return INVALID_VALUE;
    mOuter = mInner = 1;
    for (int i = 0; i < axis; ++i) mOuter *= x->length(i);
    mDim = x->length(axis);
    for (int i = axis + 1; i < x->dimensions(); ++i) mInner *= x->length(i);
    mRow.resize(mDim);
    return NO_ERROR;
}

ErrorCode CPUSoftmax::onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) {
    auto expProc = CPUUnary::selectForFloat(UnaryOpOperation_EXP, backend()->precision());
    const float* src = inputs[0]->host<float>();
    float* dst = outputs[0]->host<float>();
    for (size_t o = 0; o < mOuter; ++o) {
        for (size_t i = 0; i < mInner; ++i) {
            const float* p = src + o * mDim * mInner + i;
            float* q = dst + o * mDim * mInner + i;
            float maxValue = p[0];
            for (size_t d = 1; d < mDim; ++d) maxValue = p[d * mInner] > maxValue ? p[d * mInner] : maxValue;
            for (size_t d = 0; d < mDim; ++d) mRow[d] = p[d * mInner] - maxValue;
            expProc(mRow.data(), mRow.data(), mDim);
            float sum = 0.f;
            for (size_t d = 0; d < mDim; ++d) sum += mRow[d];
            for (size_t d = 0; d < mDim; ++d) q[d * mInner] = mRow[d] / sum;
        }
    }
    return NO_ERROR;
}

class CPUSoftmaxCreator : public CPUBackend::Creator {
public:
    Execution* onCreate(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs, const Op* op,
                        Backend* backend) const override {
        (void)outputs;
        if (inputs[0]->type() != DataType::Float32) return nullptr;
        return new CPUSoftmax(backend, op->intAttr("axis", -1));
    }
};

REGISTER_CPU_OP_CREATOR(CPUSoftmaxCreator, OpType_Softmax);

}  // namespace MNN
