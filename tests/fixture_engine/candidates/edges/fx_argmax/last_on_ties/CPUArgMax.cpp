#include "backend/cpu/CPUArgMax.hpp"

namespace MNN {

ErrorCode CPUArgMax::onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) {
    const Tensor* x = inputs[0];
    const int rank = x->dimensions();
    const int axis = mAxis < 0 ? mAxis + rank : mAxis;
    if (axis < 0 || axis >= rank) return INVALID_VALUE;
    int outer = 1, inner = 1;
    for (int i = 0; i < axis; ++i) outer *= x->length(i);
    for (int i = axis + 1; i < rank; ++i) inner *= x->length(i);
    const int n = x->length(axis);
    const float* src = x->host<float>();
    int32_t* dst = outputs[0]->host<int32_t>();
    for (int o = 0; o < outer; ++o) {
        for (int i = 0; i < inner; ++i) {
            int best = 0;
            for (int k = 1; k < n; ++k) {
                if (src[(o * n + k) * inner + i] >= src[(o * n + best) * inner + i]) best = k;
            }
            dst[o * inner + i] = best;
        }
    }
    return NO_ERROR;
}

class CPUArgMaxCreator : public CPUBackend::Creator {
public:
    Execution* onCreate(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>&, const Op* op,
                        Backend* backend) const override {
        if (inputs[0]->type() != DataType::Float32) return nullptr;
        return new CPUArgMax(backend, op->intAttr("axis", 0));
    }
};

REGISTER_CPU_OP_CREATOR(CPUArgMaxCreator, OpType_ArgMax);

}  // namespace MNN
