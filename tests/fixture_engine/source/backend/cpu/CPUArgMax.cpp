#include "backend/cpu/CPUArgMax.hpp"

#include "shape/SizeComputer.hpp"

namespace MNN {

CPUArgMax::CPUArgMax(Backend* backend, int axis) : Execution(backend), mAxis(axis) {}

ErrorCode CPUArgMax::onResize(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) {
    (void)outputs;
    const Tensor* x = inputs[0];
    int axis = normalizeAxis(mAxis, x->dimensions());
    if (axis < 0) return INVALID_VALUE;
    mOuter = mInner = 1;
    for (int i = 0; i < axis; ++i) mOuter *= x->length(i);
    mDim = x->length(axis);
    for (int i = axis + 1; i < x->dimensions(); ++i) mInner *= x->length(i);
    return NO_ERROR;
}

ErrorCode CPUArgMax::onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) {
    const float* src = inputs[0]->host<float>();
    int32_t* dst = outputs[0]->host<int32_t>();
    for (size_t o = 0; o < mOuter; ++o) {
        for (size_t i = 0; i < mInner; ++i) {
            const float* p = src + o * mDim * mInner + i;
            int32_t best = 0;
            float bestValue = p[0];
            for (size_t d = 1; d < mDim; ++d) {
                if (p[d * mInner] > bestValue) {
                    bestValue = p[d * mInner];
                    best = static_cast<int32_t>(d);
                }
            }
            dst[o * mInner + i] = best;
        }
    }
    return NO_ERROR;
}

class CPUArgMaxCreator : public CPUBackend::Creator {
public:
    Execution* onCreate(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs, const Op* op,
                        Backend* backend) const override {
        (void)outputs;
        if (inputs[0]->type() != DataType::Float32) return nullptr;
        return new CPUArgMax(backend, op->intAttr("axis", 0));
    }
};

REGISTER_CPU_OP_CREATOR(CPUArgMaxCreator, OpType_ArgMax);

}  // namespace MNN
