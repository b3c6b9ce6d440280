#include "backend/cpu/CPUArgMax.hpp"

#include <arm_neon.h>

namespace MNN {

// NEON: four inner positions at a time keep their running maximum and its index; a later k wins only when
// strictly greater (the first maximum, as ONNX's select_last_index = 0).
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
        const float* block = src + o * n * inner;
        int i = 0;
        for (; i + 4 <= inner; i += 4) {
            float32x4_t best = vld1q_f32(block + i);
            int32x4_t bestIdx = vdupq_n_s32(0);
            for (int k = 1; k < n; ++k) {
                float32x4_t v = vld1q_f32(block + k * inner + i);
                uint32x4_t greater = vcgtq_f32(v, best);
                best = vbslq_f32(greater, v, best);
                bestIdx = vbslq_s32(greater, vdupq_n_s32(k), bestIdx);
            }
            vst1q_s32(dst + o * inner + i, bestIdx);
        }
        for (; i < inner; ++i) {
            int b = 0;
            for (int k = 1; k < n; ++k) {
                if (block[k * inner + i] > block[b * inner + i]) b = k;
            }
            dst[o * inner + i] = b;
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
