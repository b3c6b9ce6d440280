// Fixture engine: ArgMax along one axis; int32 indices (first maximum wins).
#pragma once
#include "core/Execution.hpp"

namespace MNN {

class CPUArgMax : public Execution {
public:
    CPUArgMax(Backend* backend, int axis);
    ErrorCode onResize(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) override;
    ErrorCode onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) override;

private:
    int mAxis;
    size_t mOuter = 1, mDim = 1, mInner = 1;
};

}  // namespace MNN
