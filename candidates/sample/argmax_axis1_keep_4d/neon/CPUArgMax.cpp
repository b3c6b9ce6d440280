// ArgMax / ArgMin with NEON: four inner positions at a time keep their running best value and its index
// (a compare, then two bit-selects per step along the reduced axis; a later index wins only when strictly
// better: the first maximum, as ONNX's select_last_index = 0).  int32 inputs and the last inner positions
// (fewer than four) take the scalar loop.  The input is read row-major (ONNX models keep NCHW).
#include <arm_neon.h>

#include "backend/cpu/CPUArgMax.hpp"
#include "backend/cpu/CPUBackend.hpp"
#include "core/Macro.h"
#include "core/TensorUtils.hpp"

namespace MNN {

CPUArgMax::CPUArgMax(Backend *backend, ArgMinOrMax mode, int axis) : Execution(backend), mMode(mode), mAxis(axis) {
}

ErrorCode CPUArgMax::onResize(const std::vector<Tensor *> &inputs, const std::vector<Tensor *> &outputs) {
    auto input = inputs[0];
    if (TensorUtils::getDescribe(input)->dimensionFormat == MNN_DATA_FORMAT_NC4HW4) {
        MNN_ERROR("CPUArgMax (naive): NC4HW4 input is not supported\n");
        return NOT_SUPPORT;
    }
    const int rank = input->dimensions();
    int axis = mAxis < 0 ? mAxis + rank : mAxis;
    if (axis < 0 || axis >= rank) {
        return INVALID_VALUE;
    }
    mOuter = 1;
    mInner = 1;
    for (int i = 0; i < axis; ++i) {
        mOuter *= input->length(i);
    }
    mLength = input->length(axis);
    for (int i = axis + 1; i < rank; ++i) {
        mInner *= input->length(i);
    }
    return NO_ERROR;
}

template <typename T>
static void argReduce(const T *src, int32_t *dst, int outer, int length, int inner, bool isMax) {
    for (int o = 0; o < outer; ++o) {
        const T *base = src + (size_t)o * length * inner;
        for (int i = 0; i < inner; ++i) {
            T best = base[i];
            int bestIndex = 0;
            for (int d = 1; d < length; ++d) {
                T v = base[(size_t)d * inner + i];
                if (isMax ? (v > best) : (v < best)) {
                    best = v;
                    bestIndex = d;
                }
            }
            dst[(size_t)o * inner + i] = bestIndex;
        }
    }
}

static void argReduceNeon(const float *src, int32_t *dst, int outer, int length, int inner, bool isMax) {
    for (int o = 0; o < outer; ++o) {
        const float *base = src + (size_t)o * length * inner;
        int i = 0;
        for (; i + 4 <= inner; i += 4) {
            float32x4_t best  = vld1q_f32(base + i);
            int32x4_t bestIdx = vdupq_n_s32(0);
            for (int d = 1; d < length; ++d) {
                float32x4_t v  = vld1q_f32(base + (size_t)d * inner + i);
                uint32x4_t win = isMax ? vcgtq_f32(v, best) : vcltq_f32(v, best);
                best    = vbslq_f32(win, v, best);
                bestIdx = vbslq_s32(win, vdupq_n_s32(d), bestIdx);
            }
            vst1q_s32(dst + (size_t)o * inner + i, bestIdx);
        }
        for (; i < inner; ++i) {
            float b   = base[i];
            int index = 0;
            for (int d = 1; d < length; ++d) {
                float v = base[(size_t)d * inner + i];
                if (isMax ? (v > b) : (v < b)) {
                    b     = v;
                    index = d;
                }
            }
            dst[(size_t)o * inner + i] = index;
        }
    }
}

ErrorCode CPUArgMax::onExecute(const std::vector<Tensor *> &inputs, const std::vector<Tensor *> &outputs) {
    auto input = inputs[0];
    auto out = outputs[0]->host<int32_t>();
    const bool isMax = (mMode == ARGMAX);
    if (input->getType().code == halide_type_int) {
        argReduce<int32_t>(input->host<int32_t>(), out, mOuter, mLength, mInner, isMax);
    } else {
        argReduceNeon(input->host<float>(), out, mOuter, mLength, mInner, isMax);
    }
    return NO_ERROR;
}

class CPUArgMaxCreator : public CPUBackend::Creator {
public:
    virtual Execution *onCreate(const std::vector<Tensor *> &inputs, const std::vector<Tensor *> &outputs,
                                const MNN::Op *op, Backend *backend) const override {
        auto param = op->main_as_ArgMax();
        int axis = param ? param->axis() : 0;
        auto mode = op->type() == OpType_ArgMin ? CPUArgMax::ARGMIN : CPUArgMax::ARGMAX;
        return new CPUArgMax(backend, mode, axis);
    }
};

REGISTER_CPU_OP_CREATOR(CPUArgMaxCreator, OpType_ArgMax);
REGISTER_CPU_OP_CREATOR(CPUArgMaxCreator, OpType_ArgMin);

} // namespace MNN
