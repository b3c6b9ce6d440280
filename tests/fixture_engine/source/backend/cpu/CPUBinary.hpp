// Fixture engine: float binary ops with numpy broadcasting (BinaryOp).
#pragma once
#include "core/Execution.hpp"

namespace MNN {

class CPUBinary : public Execution {
public:
    using BinaryProc = float (*)(float a, float b);
    CPUBinary(Backend* backend, BinaryProc proc);
    ErrorCode onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) override;
    // The scalar routine for a BinaryOpOperation value, or nullptr if unsupported.
    static BinaryProc selectForFloat(int type);

private:
    BinaryProc mProc;
};

}  // namespace MNN
