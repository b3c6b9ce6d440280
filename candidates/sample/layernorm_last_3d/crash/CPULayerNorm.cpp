// Naive LayerNorm: per row of `inner` elements, mean and variance accumulated in double, then
// y = (x - mean) / sqrt(var + eps) * gamma + beta. RMSNorm skips the mean.
#include "backend/cpu/CPULayerNorm.hpp"
#include <cmath>
#include "backend/cpu/CPUBackend.hpp"
#include "core/Macro.h"

namespace MNN {

CPULayerNorm::CPULayerNorm(Backend *backend, const Op *op) : Execution(backend) {
    auto param = op->main_as_LayerNorm();
    if (param->axis() != nullptr) {
        mAxisCount = param->axis()->size();
    }
    mGroup = param->group();
    mEpsilon = param->epsilon();
    mRMSNorm = param->useRMSNorm();
    if (param->gamma() != nullptr && param->beta() != nullptr) {
        mGamma.assign(param->gamma()->begin(), param->gamma()->end());
        mBeta.assign(param->beta()->begin(), param->beta()->end());
    }
}

ErrorCode CPULayerNorm::onResize(const std::vector<Tensor *> &inputs, const std::vector<Tensor *> &outputs) {
    auto input = inputs[0];
    const int rank = input->dimensions();
    mOuter = 1;
    mInner = 1;
    if (mGroup > 1) {
        // group norm: every batch item is split into mGroup rows
        mOuter = input->length(0) * mGroup;
        mInner = input->elementSize() / mOuter;
    } else {
        int count = mAxisCount > 0 ? mAxisCount : 1;
        for (int i = 0; i < rank - count; ++i) {
            mOuter *= input->length(i);
        }
        for (int i = rank - count; i < rank; ++i) {
            mInner *= input->length(i);
        }
    }
    if (!mGamma.empty() && (int)mGamma.size() != mInner) {
        MNN_ERROR("CPULayerNorm: gamma has %d values, rows have %d\n", (int)mGamma.size(), mInner);
        return INVALID_VALUE;
    }
    return NO_ERROR;
}

ErrorCode CPULayerNorm::onExecute(const std::vector<Tensor *> &inputs, const std::vector<Tensor *> &outputs) {
    const float *src = inputs[0]->host<float>();
    float *dst = outputs[0]->host<float>();
    const bool affine = !mGamma.empty();
    for (int o = 0; o < mOuter; ++o) {
        const float *x = src + (size_t)o * mInner;
        float *y = dst + (size_t)o * mInner;
        double mean = 0.0;
        if (!mRMSNorm) {
            for (int i = 0; i < mInner; ++i) {
                mean += x[i];
            }
            mean /= mInner;
        }
        double var = 0.0;
        for (int i = 0; i < mInner; ++i) {
            double d = x[i] - mean;
            var += d * d;
        }
        var /= mInner;
        const double scale = 1.0 / std::sqrt(var + (double)mEpsilon);
        for (int i = 0; i < mInner; ++i) {
            mRow[i] = (float)((x[i] - mean) * scale);
        }
        for (int i = 0; i < mInner; ++i) {
            y[i] = affine ? mRow[i] * mGamma[i] + mBeta[i] : mRow[i];
        }
    }
    return NO_ERROR;
}

class CPULayerNormCreator : public CPUBackend::Creator {
public:
    Execution *onCreate(const std::vector<Tensor *> &inputs, const std::vector<Tensor *> &outputs,
                        const MNN::Op *op, Backend *backend) const override {
        auto param = op->main_as_LayerNorm();
        if (nullptr == param) {
            return nullptr;
        }
        if (param->gamma() == nullptr && param->external() != nullptr && param->external()->size() > 1 &&
            param->external()->data()[1] > 0) {
            MNN_ERROR("CPULayerNorm (naive): external gamma/beta are not supported\n");
            return nullptr;
        }
        if (inputs[0]->getType().code != halide_type_float || inputs[0]->getType().bits != 32) {
            return nullptr;
        }
        return new CPULayerNorm(backend, op);
    }
};

REGISTER_CPU_OP_CREATOR(CPULayerNormCreator, OpType_LayerNorm);

} // namespace MNN
