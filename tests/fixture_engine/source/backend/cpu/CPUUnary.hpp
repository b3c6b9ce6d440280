// Fixture engine: element-wise float unary ops (UnaryOp).  selectForFloat is also used by CPUSoftmax.
#pragma once
#include "core/Execution.hpp"

namespace MNN {

class CPUUnary : public Execution {
public:
    using UnaryProc = void (*)(float* dst, const float* src, size_t count);
    CPUUnary(Backend* backend, UnaryProc proc);
    ErrorCode onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) override;
    // The float routine for a UnaryOpOperation value, or nullptr if unsupported.
    static UnaryProc selectForFloat(int type, Precision precision);

private:
    UnaryProc mProc;
};

}  // namespace MNN
