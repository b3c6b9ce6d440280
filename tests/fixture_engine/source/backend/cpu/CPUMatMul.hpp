// Fixture engine: 2-D MatMul, C = op(A) x op(B).
#pragma once
#include "core/Execution.hpp"

namespace MNN {

class CPUMatMul : public Execution {
public:
    CPUMatMul(Backend* backend, bool transposeA, bool transposeB, bool transposeC, bool needParallel);
    ErrorCode onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) override;

private:
    bool mTransposeA, mTransposeB, mTransposeC, mNeedParallel;
};

}  // namespace MNN
