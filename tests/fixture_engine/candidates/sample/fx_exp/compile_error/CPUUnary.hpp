#pragma once
#include "core/Execution.hpp"

namespace MNN {

class CPUUnary : public Execution {
public:
    CPUUnary(Backend* backend, int type) : Execution(backend), mType(type) {}
    ErrorCode onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) override;

private:
    int mType;
};

}  // namespace MNN
