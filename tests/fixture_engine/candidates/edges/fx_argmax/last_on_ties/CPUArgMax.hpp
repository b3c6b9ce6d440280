#pragma once
#include "core/Execution.hpp"

namespace MNN {

// Naive ArgMax: recomputes the loop bounds on every run.
class CPUArgMax : public Execution {
public:
    CPUArgMax(Backend* backend, int axis) : Execution(backend), mAxis(axis) {}
    ErrorCode onExecute(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs) override;

private:
    int mAxis;
};

}  // namespace MNN
