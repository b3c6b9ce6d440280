// Fixture engine: numerically stable softmax along one axis (uses CPUUnary::selectForFloat for exp).
#pragma once
#include "core/Execution.hpp"

namespace MNN {

class CPUSoftmax : public Execution {
public:
    CPUSoftmax(Backend* backend, int axis);
    ErrorCode onResize(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) override;
    ErrorCode onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) override;

private:
    int mAxis;
    size_t mOuter = 1, mDim = 1, mInner = 1;
    std::vector<float> mRow;
};

}  // namespace MNN
