#include "backend/cpu/CPUReduction.hpp"

#include <cstring>

#include "shape/SizeComputer.hpp"

namespace MNN {

CPUReduction::CPUReduction(Backend* backend, std::vector<int> axes, int operation)
    : Execution(backend), mAxes(std::move(axes)), mOperation(operation) {}

ErrorCode CPUReduction::onResize(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) {
    (void)outputs;
    const Tensor* x = inputs[0];
    int rank = x->dimensions();
    std::vector<bool> reduced(rank, mAxes.empty());
    for (int a : mAxes) {
        int n = normalizeAxis(a, rank);
        if (n < 0) return INVALID_VALUE;
        reduced[n] = true;
    }
    mOutStride.assign(rank, 0);
    mCount = 1;
    size_t s = 1;
    for (int i = rank; i-- > 0;) {
        if (reduced[i]) {
            mCount *= x->length(i);
        } else {
            mOutStride[i] = s;
            s *= x->length(i);
        }
    }
    return NO_ERROR;
}

ErrorCode CPUReduction::onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) {
    const Tensor* x = inputs[0];
    const float* src = x->host<float>();
    float* dst = outputs[0]->host<float>();
    size_t outSize = outputs[0]->elementSize();
    std::memset(dst, 0, outSize * sizeof(float));
    int rank = x->dimensions();
    std::vector<int> idx(rank, 0);
    size_t o = 0;
    for (size_t i = 0, n = x->elementSize(); i < n; ++i) {
        dst[o] += src[i];
        for (int d = rank; d-- > 0;) {
            ++idx[d];
            o += mOutStride[d];
            if (idx[d] < x->length(d)) break;
            o -= mOutStride[d] * x->length(d);
            idx[d] = 0;
        }
    }
    if (mOperation == 1) {
        for (size_t i = 0; i < outSize; ++i) dst[i] /= static_cast<float>(mCount);
    }
    return NO_ERROR;
}

class CPUReductionCreator : public CPUBackend::Creator {
public:
    Execution* onCreate(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs, const Op* op,
                        Backend* backend) const override {
        (void)outputs;
        int operation = op->intAttr("operation", 0);
        if (inputs[0]->type() != DataType::Float32 || operation < 0 || operation > 1) return nullptr;
        const std::vector<int>* axes = op->listAttr("dim");
        return new CPUReduction(backend, axes ? *axes : std::vector<int>(), operation);
    }
};

REGISTER_CPU_OP_CREATOR(CPUReductionCreator, OpType_Reduction);

}  // namespace MNN
