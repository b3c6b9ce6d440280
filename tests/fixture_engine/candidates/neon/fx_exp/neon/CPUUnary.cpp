#include "backend/cpu/CPUUnary.hpp"

#include <arm_neon.h>

#include <cmath>

namespace MNN {

// NEON: four lanes per step (abs and negation in one instruction; exp lane by lane, exact as std::exp).
static void expFloat(float* dst, const float* src, size_t n) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t x = vld1q_f32(src + i);
        float lanes[4] = {expf(vgetq_lane_f32(x, 0)), expf(vgetq_lane_f32(x, 1)), expf(vgetq_lane_f32(x, 2)),
                          expf(vgetq_lane_f32(x, 3))};
        vst1q_f32(dst + i, vld1q_f32(lanes));
    }
    for (; i < n; ++i) dst[i] = expf(src[i]);
}
static void absFloat(float* dst, const float* src, size_t n) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, vabsq_f32(vld1q_f32(src + i)));
    for (; i < n; ++i) dst[i] = src[i] < 0.f ? -src[i] : src[i];
}
static void negFloat(float* dst, const float* src, size_t n) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, vnegq_f32(vld1q_f32(src + i)));
    for (; i < n; ++i) dst[i] = -src[i];
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
